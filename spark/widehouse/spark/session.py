"""The Spark session factory: Delta, Hive support, small local footprint, cluster-ready.

:func:`spark_conf` is a pure function from :class:`~widehouse.settings.Settings` to Spark
settings (easy to test and to print); :func:`build_session` applies it. Precedence, lowest first:
Widehouse defaults < derived settings (metastore, jars, partitions) < ``WIDEHOUSE_SPARK_CONF`` <
the ``overrides`` argument of a caller.

On a non-local master (:func:`check_cluster`) the job ships its code: the packed executor
environment (``WIDEHOUSE_SPARK_ARCHIVE``) or the wheel (``WIDEHOUSE_SPARK_PY_FILES``) that
``widehouse spark package`` builds (:mod:`widehouse.spark.shipping`), and its checkpoint root, Delta
root and warehouse dir must be storage every node reaches.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, MutableMapping, Sequence
from contextlib import AbstractContextManager, chdir, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

from widehouse.errors import ConfigError, SetupError
from widehouse.private import private_dir
from widehouse.services.metastore import list_databases
from widehouse.settings import Settings
from widehouse.spark import fork_server
from widehouse.spark.class_archive import driver_java_options, spark_home, with_driver_options
from widehouse.spark.driver_launch import direct_launch
from widehouse.spark.fork_server import ForkServer, serving
from widehouse.spark.jit import Workload, jit_profile, with_jit
from widehouse.spark.lean_home import driver_environ, spark_home_of
from widehouse.spark.python_zips import spark_python_zips
from widehouse.spark.scratch import process_scratch
from widehouse.spark.shipping import ENV_NAME, ENV_PYTHON
from widehouse.spark.static_sources import answer_static_lookup

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def spark_conf(
    settings: Settings, app_name: str, overrides: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Every Spark setting Widehouse applies, as strings."""
    spark = settings.spark
    hive = settings.hive
    conf: dict[str, str] = {
        "spark.master": spark.master,
        "spark.app.name": app_name,
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.sql.catalogImplementation": "hive",
        # inserts into Hive tables partitioned from the data (the offline tables: a day per
        # partition). Hive's settings belong in the Hadoop conf: a SET of them works for Spark's
        # own checks, but Spark warns on every SET that it might not
        "spark.hadoop.hive.exec.dynamic.partition": "true",
        "spark.hadoop.hive.exec.dynamic.partition.mode": "nonstrict",
        "spark.sql.warehouse.dir": hive.warehouse_dir,
        "spark.sql.shuffle.partitions": str(spark.shuffle_partitions),
        "spark.ui.enabled": str(spark.ui_enabled).lower(),
        "spark.driver.memory": spark.driver_memory,
        # hours and days are UTC everywhere: Spark, ClickHouse, HBase row keys
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.streaming.metricsEnabled": "true",
        "spark.ui.showConsoleProgress": "false",
        "spark.databricks.delta.schema.autoMerge.enabled": "false",
        # Spark's default, stated: a micro-batch's Python tasks (the pulsar reader, mapInArrow) reuse
        # their worker processes, so the source's cached readers and clients survive across batches
        "spark.python.worker.reuse": "true",
        # pools share the cores fairly: each stream group's jobs run in a pool of its own
        # (widehouse.stream.spark.job), so one group's batch no longer queues behind all of another
        # group's tasks; a job without a pool runs in the default pool, first in first out, as before
        "spark.scheduler.mode": "FAIR",
    }
    if spark.jars:
        conf["spark.jars"] = ",".join(spark.jars)
    if hive.metastore_uri:
        # a metastore server (by default the local `metastore` service): every process shares it
        conf["spark.hadoop.hive.metastore.uris"] = hive.metastore_uri
    else:
        # WIDEHOUSE_HIVE_METASTORE_URI=embedded: Spark's in-process Derby, one process at a time
        conf["spark.hadoop.javax.jdo.option.ConnectionURL"] = (
            f"jdbc:derby:;databaseName={hive.metastore_db_dir};create=true"
        )
        derby_home = str(Path(hive.metastore_db_dir).parent)
        conf["spark.driver.extraJavaOptions"] = f"-Dderby.system.home={derby_home}"
    if spark.is_local:
        # one machine: few partitions everywhere, executors run this very interpreter
        conf["spark.databricks.delta.snapshotPartitions"] = str(max(1, spark.shuffle_partitions))
        conf["spark.default.parallelism"] = str(max(2, spark.shuffle_partitions))
        conf["spark.pyspark.python"] = sys.executable
        conf["spark.pyspark.driver.python"] = sys.executable
        if spark.local_dir:
            conf["spark.local.dir"] = spark.local_dir
    else:
        conf.update(_shipping_conf(settings))
    conf.update(dict(spark.extra_conf))
    conf.update(dict(overrides or {}))
    return conf


def _shipping_conf(settings: Settings) -> dict[str, str]:
    """What a non-local master's executors get the code and its Python from (never the driver's disk)."""
    spark = settings.spark
    conf: dict[str, str] = {}
    if spark.archive:
        conf["spark.archives"] = f"{spark.archive}#{ENV_NAME}"
        conf["spark.pyspark.python"] = ENV_PYTHON
        conf["spark.pyspark.driver.python"] = sys.executable  # spark-submit's client-mode driver
    elif spark.python:
        conf["spark.pyspark.python"] = spark.python
    if spark.py_files:
        conf["spark.submit.pyFiles"] = ",".join(spark.py_files)
    return conf


def check_cluster(settings: Settings) -> None:
    """On a non-local master: refuse to run without shipped code, or with driver-local data paths
    (unless ``WIDEHOUSE_SHARED_PATHS`` says every node mounts them). Names the setting to change."""
    spark = settings.spark
    if spark.is_local:
        return
    if not spark.archive and not spark.py_files:
        raise ConfigError(
            f"WIDEHOUSE_SPARK_MASTER={spark.master} is not local, but neither WIDEHOUSE_SPARK_ARCHIVE "
            "nor WIDEHOUSE_SPARK_PY_FILES is set: executors cannot import widehouse. Run `widehouse "
            "spark package` and set what it prints"
        )
    if spark.shared_paths:
        return
    for variable, location in (
        ("WIDEHOUSE_STREAM_CHECKPOINT_ROOT", settings.stream.checkpoint_root),
        ("WIDEHOUSE_DELTA_ROOT", settings.delta.root),
        ("WIDEHOUSE_HIVE_WAREHOUSE", settings.hive.warehouse_dir),
    ):
        if is_driver_local(location):
            raise ConfigError(
                f"{variable}={location} is a path on the driver's disk, which the executors of "
                f"WIDEHOUSE_SPARK_MASTER={spark.master} cannot reach: use storage every node reaches "
                "(hdfs://, s3a://, ...), or set WIDEHOUSE_SHARED_PATHS=true if every node mounts it "
                "at the same place"
            )


def is_driver_local(location: str) -> bool:
    """A plain path or a ``file:`` URI (``s3a://``, ``hdfs://`` ... are shared by nature)."""
    return location.startswith("/") or location.startswith("file:")


def _driver_cwd(settings: Settings) -> Path:
    """The driver JVM's working directory with the packed environment: ``./env`` -> this interpreter's
    environment.

    Spark's Python functions carry one interpreter path for the executors and for the driver's own
    Python workers (the Python data source's planner and stream reader run beside the driver JVM, in
    its working directory). With the archive it is ``./env/bin/python``: an executor finds ``./env``
    unpacked in its work dir; the driver JVM, started in this directory, finds this interpreter.
    """
    root = settings.state_dir / "spark" / "driver"
    private_dir(root)
    link = root / ENV_NAME
    target = Path(sys.prefix)
    if not (link.is_symlink() and link.readlink() == target):
        tmp = root / f".{ENV_NAME}.{os.getpid()}"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(target)
        tmp.replace(link)  # atomic: drivers of other processes may be starting beside this one
    return root


def check_jars(settings: Settings) -> None:
    """Local jar files must exist before the JVM starts (a missing Delta jar fails much later)."""
    missing = [j for j in settings.spark.jars if "://" not in j and not Path(j).is_file()]
    if missing:
        raise SetupError(f"Spark jars missing: {', '.join(missing)}; run `make setup`")
    if settings.spark.is_local and not settings.spark.jars:
        raise SetupError(
            f"no Delta jars under {settings.local.vendor_dir / 'delta'}; run `make setup` "
            "(or set WIDEHOUSE_SPARK_JARS)"
        )


def check_metastore(settings: Settings, conf: Mapping[str, str]) -> None:
    """A session that uses the local ``metastore`` service needs it running: say so before the JVM
    starts, instead of Hive's client retrying and failing later on the first catalog call."""
    if conf.get("spark.sql.catalogImplementation") != "hive":
        return
    uri = conf.get("spark.hadoop.hive.metastore.uris")
    if uri != settings.local.hive_metastore_uri:
        return  # embedded Derby, or a remote metastore (reached, and reported, by Hive's client)
    try:
        list_databases("127.0.0.1", settings.local.hive_metastore_port, timeout=30)
    except (OSError, ValueError) as exc:
        raise SetupError(
            f"the Hive metastore at {uri} is not answering ({exc}): start it with `widehouse services up` "
            "(or `widehouse services up metastore`); for a single Spark process without it, set "
            "WIDEHOUSE_HIVE_METASTORE_URI=embedded"
        ) from exc


def make_local_dirs(settings: Settings) -> None:
    """Create the session's local data dirs (Hive metastore, Spark scratch, Delta root, warehouse)
    as 0700: this user's only. URIs (s3a://, hdfs://) are the store's business."""
    if not settings.hive.metastore_uri:
        private_dir(Path(settings.hive.metastore_db_dir).parent)
    if settings.spark.local_dir:
        private_dir(Path(settings.spark.local_dir))
    for location in (settings.delta.root, settings.hive.warehouse_dir):
        if location.startswith("/"):
            private_dir(Path(location))


def build_session(
    settings: Settings,
    app_name: str,
    overrides: Mapping[str, str] | None = None,
    *,
    workload: Workload = "batch",
    python_preload: Sequence[str] = (),
) -> SparkSession:
    """Get or create the process's SparkSession configured by :func:`spark_conf`; ``workload``
    picks the driver JVM's JIT profile under ``auto`` (:mod:`widehouse.spark.jit`)."""
    from pyspark.sql import SparkSession

    from widehouse.spark.py4j_numpy import convert_numpy_without_test_imports

    convert_numpy_without_test_imports()
    check_jars(settings)
    check_cluster(settings)
    # the driver JVM runs from the lean Spark home (no ML functions registered in every session) and
    # maps the class-data-sharing archive of this JDK and that home, when one is built
    environ = driver_environ(settings)
    conf = spark_conf(settings, app_name, overrides)
    conf = with_driver_options(conf, driver_java_options(settings, environ))
    conf = with_jit(conf, jit_profile(settings.spark.driver_jit, workload))
    check_metastore(settings, conf)
    make_local_dirs(settings)
    conf, scratch = with_process_scratch(settings, conf)
    jvm_cwd: Path | None = None
    if settings.spark.is_local:
        # Python data sources (the pulsar source) run in processes the JVM starts with its own
        # PYSPARK_PYTHON, not spark.pyspark.python: make it this interpreter before the JVM starts.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    elif settings.spark.archive:
        # Spark takes every Python worker's interpreter from PYSPARK_PYTHON (spark.pyspark.python
        # only reaches spark-submit's driver): the archive's, with the driver JVM in _driver_cwd
        os.environ["PYSPARK_PYTHON"] = ENV_PYTHON
        jvm_cwd = _driver_cwd(settings)
    elif settings.spark.python:
        os.environ["PYSPARK_PYTHON"] = settings.spark.python
    # Python workers (the pulsar source's planner among them) connect back to the JVM within
    # SPARK_AUTH_SOCKET_TIMEOUT seconds (15 by default); a busy 2-core box misses that and fails the
    # query with CANNOT_OPEN_SOCKET. The workers inherit it from the JVM, so set it before it starts.
    os.environ.setdefault("SPARK_AUTH_SOCKET_TIMEOUT", "120")
    blas_single_threaded(os.environ)
    # started with the environment the JVM gets, so its imports (numpy's BLAS) are the workers'
    forks = _fork_server(settings, environ, python_preload) if settings.spark.is_local else None
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    if conf["spark.sql.catalogImplementation"] == "hive":  # jobs without tables pass "in-memory"
        builder = builder.enableHiveSupport()
    plans = settings.spark.launch_plans_dir
    # the driver JVM (if this starts it) from its launch plan: no spark-submit launcher JVM first
    with (
        direct_launch(Path(plans) if plans else None),
        spark_home_of(environ),
        _jvm_cwd(jvm_cwd),
        serving(forks),
    ):
        if scratch is not None:
            _start_jvm_with_tmpdir(conf, scratch)
        session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    if settings.spark.is_local:
        _files_dir_on_python_path(session)
    answer_static_lookup(session)  # no planner process just to find no installed data sources
    return session


def _fork_server(settings: Settings, environ: Mapping[str, str], preload: Sequence[str]) -> ForkServer | None:
    """This process's fork server for the Python processes of a local session's JVM
    (:mod:`widehouse.spark.fork_server`), when they would run this interpreter; else None."""
    from pyspark import SparkContext

    directory = settings.spark.forks_dir
    if not directory or os.environ.get("PYSPARK_PYTHON") != sys.executable:
        return None
    if SparkContext._active_spark_context is not None:  # getOrCreate gives it: its JVM runs already
        return None
    home = spark_home(environ)
    if home is None:
        return None
    # Spark's order: pyspark's zip, then py4j's (PythonUtils.sparkPythonPath)
    zips = sorted(spark_python_zips(home), key=lambda zip_path: zip_path.name != "pyspark.zip")
    return fork_server.ensure(Path(directory), zips, preload)


def with_process_scratch(settings: Settings, conf: dict[str, str]) -> tuple[dict[str, str], Path | None]:
    """``conf`` with ``spark.local.dir`` this process's own scratch under the settings' local dir
    (:mod:`widehouse.spark.scratch`), and that scratch; ``conf`` as it is and None when the local dir
    is unset or ``WIDEHOUSE_SPARK_CONF`` / an override chose another ``spark.local.dir``.

    On any master: a cluster's executors take their local dirs from the cluster manager
    (``SPARK_EXECUTOR_DIRS``, ``SPARK_LOCAL_DIRS``, ``LOCAL_DIRS``), never from this setting, while
    the driver otherwise keeps a cluster job's unpacked archive in ``/tmp``."""
    root = settings.spark.local_dir
    if not root or conf.get("spark.local.dir", root) != root:
        return conf, None
    scratch = process_scratch(Path(root))
    return {**conf, "spark.local.dir": str(scratch)}, scratch


def _start_jvm_with_tmpdir(conf: Mapping[str, str], scratch: Path) -> None:
    """Start the driver JVM (unless it runs) and point its ``java.io.tmpdir`` at ``scratch`` before
    the SparkContext exists: Spark's ``createTempDir()`` (a cluster job's fetched archive, 97 MB) and
    Hive's session resources read the property when they make a directory, and a driver killed
    before its shutdown hook ran leaves them behind. Setting it here keeps ``-Djava.io.tmpdir`` out
    of the driver's Java options, which key its launch plan (:mod:`widehouse.spark.driver_launch`)."""
    from pyspark import SparkConf, SparkContext

    spark_conf = SparkConf()
    for key, value in conf.items():
        spark_conf.set(key, value)
    SparkContext._ensure_initialized(conf=spark_conf)
    jvm = SparkContext._jvm
    assert jvm is not None
    jvm.java.lang.System.setProperty("java.io.tmpdir", str(scratch))


def _jvm_cwd(path: Path | None) -> AbstractContextManager[object]:
    """The working directory a JVM started inside inherits (this process gets its own back after);
    nothing changes with None."""
    return chdir(path) if path is not None else nullcontext()


def blas_single_threaded(environ: MutableMapping[str, str]) -> None:
    """One OpenBLAS thread in the Python processes the driver JVM starts, unless the user chose.

    Those processes (a query's source runner, the data sources' planners) import numpy with pyarrow
    and never multiply a matrix, yet OpenBLAS starts a thread per core at import that spins before
    it sleeps: 7 % of a source runner's samples (perf), ~0.07 core-s a process. Spark gives its task
    workers ``OMP_NUM_THREADS`` (which OpenBLAS honours) but not these. Measured over three
    alternating pairs of 300k drains: their CPU 0.70-0.76x, a cold app's start-up 0.80x (NOTES,
    issue 28). They inherit the JVM's environment, so this goes into this process's before the JVM
    starts; a set ``OPENBLAS_NUM_THREADS`` or ``OMP_NUM_THREADS`` is left as it is."""
    if not any(environ.get(name) for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")):
        environ["OPENBLAS_NUM_THREADS"] = "1"


def _files_dir_on_python_path(session: SparkSession) -> None:
    """Every Python process Spark starts from now on (task workers, the data source's planners, a
    query's source runner) finds the context's files directory on its path from the start.

    A Python worker puts that directory (``SparkFiles``) on ``sys.path`` before its first task and,
    when it was not there, calls ``importlib.invalidate_caches()``. With pyspark imported from
    Spark's ``pyspark.zip``, each of the ~15 zip importers then reads the zip's 2,600-entry
    directory again: 0.09-0.2 core-s in every such process, a dozen of them as an app starts.
    Spark puts the ``PYTHONPATH`` of a function's environment (the context's ``environment``, taken
    when the function or data source is made) on its processes' path, so with the directory there
    nothing changes and nothing is read again. A query's source runner gets the directory's
    ``streaming_job`` folder instead (Spark's ``PythonStreamingSourceRunner``), so that goes on the
    path too. Local mode only: an executor elsewhere has a directory of its own. The data source
    lookup Spark runs as the session starts comes before this and still reads the zip again."""
    from pyspark import SparkFiles

    context = session.sparkContext
    root = SparkFiles.getRootDirectory()
    paths = [p for p in context.environment.get("PYTHONPATH", "").split(os.pathsep) if p]
    wanted = [d for d in (root, os.path.join(root, "streaming_job")) if d not in paths]
    if wanted:
        context.environment["PYTHONPATH"] = os.pathsep.join([*paths, *wanted])

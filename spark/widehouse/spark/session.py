"""The Spark session factory: Delta, Hive support, small local footprint, cluster-ready.

:func:`spark_conf` is a pure function from :class:`~widehouse.settings.Settings` to Spark
settings (easy to test and to print); :func:`build_session` applies it. Precedence, lowest first:
Widehouse defaults < derived settings (metastore, jars, partitions) < ``WIDEHOUSE_SPARK_CONF`` <
the ``overrides`` argument of a caller.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from widehouse.errors import SetupError
from widehouse.private import private_dir
from widehouse.services.metastore import list_databases
from widehouse.settings import Settings

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
    conf.update(dict(spark.extra_conf))
    conf.update(dict(overrides or {}))
    return conf


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
    settings: Settings, app_name: str, overrides: Mapping[str, str] | None = None
) -> SparkSession:
    """Get or create the process's SparkSession configured by :func:`spark_conf`."""
    from pyspark.sql import SparkSession

    check_jars(settings)
    conf = spark_conf(settings, app_name, overrides)
    check_metastore(settings, conf)
    make_local_dirs(settings)
    if settings.spark.is_local:
        # Python data sources (the pulsar source) run in processes the JVM starts with its own
        # PYSPARK_PYTHON, not spark.pyspark.python: make it this interpreter before the JVM starts.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # Python workers (the pulsar source's planner among them) connect back to the JVM within
    # SPARK_AUTH_SOCKET_TIMEOUT seconds (15 by default); a busy 2-core box misses that and fails the
    # query with CANNOT_OPEN_SOCKET. The workers inherit it from the JVM, so set it before it starts.
    os.environ.setdefault("SPARK_AUTH_SOCKET_TIMEOUT", "120")
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    if conf["spark.sql.catalogImplementation"] == "hive":  # jobs without tables pass "in-memory"
        builder = builder.enableHiveSupport()
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session

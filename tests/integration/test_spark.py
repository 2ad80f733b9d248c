"""Spark with Delta and Hive support, from the jars `make setup` resolved (no download at run time)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from widehouse.settings import Settings

pytestmark = pytest.mark.spark

DEAD_DRIVER = """
import sys
from pathlib import Path
from widehouse.spark.scratch import process_scratch
directory = process_scratch(Path(sys.argv[1]))
(directory / "blockmgr-0").mkdir()
print(directory, flush=True)
sys.stdin.read()
"""

DRIVER = """
import json
from pyspark import SparkFiles
from widehouse.settings import load_settings
from widehouse.spark.session import build_session

spark = build_session(load_settings(), "widehouse-scratch", {"spark.sql.catalogImplementation": "in-memory"})
jvm = spark.sparkContext._jvm
print(json.dumps({
    "local.dir": spark.sparkContext.getConf().get("spark.local.dir"),
    "java.io.tmpdir": jvm.java.lang.System.getProperty("java.io.tmpdir"),
    "files": SparkFiles.getRootDirectory(),
    "temp": str(jvm.org.apache.spark.util.Utils.createTempDir()),
}))
"""


def test_delta_write_read_and_time_travel(spark: Any, settings: Settings) -> None:
    path = settings.delta.path("it", uuid.uuid4().hex[:8])
    spark.createDataFrame([("u1", 1), ("u2", 2)], "uid string, n long").write.format("delta").save(path)
    t_between = time.time()
    time.sleep(1.1)
    spark.createDataFrame([("u3", 3)], "uid string, n long").write.format("delta").mode("append").save(path)
    spark.createDataFrame([("u9", 9)], "uid string, n long").write.format("delta").mode("overwrite").save(
        path
    )

    def uids(df: Any) -> list[str]:
        return sorted(r.uid for r in df.collect())

    assert uids(spark.read.format("delta").load(path)) == ["u9"]
    assert uids(spark.read.format("delta").option("versionAsOf", 0).load(path)) == ["u1", "u2"]
    assert uids(spark.read.format("delta").option("versionAsOf", 1).load(path)) == ["u1", "u2", "u3"]
    # after version 0 was committed and before version 1 (millisecond precision: no truncation)
    ts = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t_between)) + f".{int(t_between * 1000) % 1000:03d}"
    assert uids(spark.read.format("delta").option("timestampAsOf", ts).load(path)) == ["u1", "u2"]
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").select("version", "operation").collect()
    assert [(r.version, r.operation) for r in sorted(history)] == [(0, "WRITE"), (1, "WRITE"), (2, "WRITE")]


def test_hive_table_and_delta_table_in_the_catalog(spark: Any) -> None:
    suffix = uuid.uuid4().hex[:8]
    spark.sql(f"CREATE TABLE payments_{suffix} (uid STRING, amount DOUBLE, dt STRING) STORED AS PARQUET")
    spark.sql(
        f"INSERT INTO payments_{suffix} VALUES ('u1', 2.5, '2026-11-21'), ('u1', 1.0, '2026-11-21'), "
        "('u2', 7.0, '2026-11-21')"
    )
    rows = spark.sql(
        f"SELECT uid, sum(amount) AS s FROM payments_{suffix} GROUP BY uid ORDER BY uid"
    ).collect()
    assert [(r.uid, r.s) for r in rows] == [("u1", 3.5), ("u2", 7.0)]
    desc = {r.col_name: r.data_type for r in spark.sql(f"DESCRIBE FORMATTED payments_{suffix}").collect()}
    assert desc["Provider"].lower() == "hive"  # a Hive table in the metastore, not a data source table
    assert "parquet" in desc["Serde Library"].lower()

    spark.sql(f"CREATE TABLE wide_{suffix} (uid STRING, events BIGINT) USING delta")
    spark.sql(f"INSERT INTO wide_{suffix} VALUES ('u1', 3)")
    assert spark.table(f"wide_{suffix}").collect()[0].events == 3
    tables = {r.tableName for r in spark.sql("SHOW TABLES").collect()}
    assert {f"payments_{suffix}", f"wide_{suffix}"} <= tables


def test_session_settings_are_applied(spark: Any, settings: Settings) -> None:
    conf = spark.sparkContext.getConf()
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    assert spark.conf.get("spark.sql.shuffle.partitions") == "2"
    assert conf.get("spark.ui.enabled") == "false"
    assert str(settings.local.vendor_dir / "delta") in conf.get("spark.jars")
    assert spark.conf.get("spark.sql.catalogImplementation") == "hive"


def test_a_query_started_in_a_pool_runs_its_batches_there(spark: Any, tmp_path: Path) -> None:
    """What a stream group's query gets (``start_in_pool``): its batches' jobs are scheduled in the
    group's pool under the session's FAIR scheduler, and the starting thread's pool is put back."""
    from widehouse.stream.spark.job import start_in_pool

    pool = f"g-{uuid.uuid4().hex[:8]}"
    source = tmp_path / "in"
    source.mkdir()
    (source / "a.json").write_text('{"n": 1}\n{"n": 2}\n')
    seen: list[tuple[str | None, int]] = []

    def batch(df: Any, _batch_id: int) -> None:
        seen.append((df.sparkSession.sparkContext.getLocalProperty("spark.scheduler.pool"), df.count()))

    writer = (
        spark.readStream.schema("n long")
        .json(str(source))
        .writeStream.option("checkpointLocation", str(tmp_path / "checkpoint"))
        .foreachBatch(batch)
        .trigger(availableNow=True)
    )
    query = start_in_pool(spark, pool, writer.start)
    assert spark.sparkContext.getLocalProperty("spark.scheduler.pool") is None
    query.awaitTermination(60)
    assert spark.sparkContext.getConf().get("spark.scheduler.mode") == "FAIR"
    assert seen == [(pool, 2)]
    # the scheduler made the pool when the batch's tasks were submitted to it
    assert spark.sparkContext._jsc.sc().getPoolForName(pool).isDefined()


def test_python_workers_start_with_the_files_directory_on_their_path(spark: Any) -> None:
    """A worker whose first task has to add Spark's files directory to ``sys.path`` clears the
    import caches, and every importer of ``pyspark.zip`` reads the zip's directory again. The
    session hands the directory (and a query runner's ``streaming_job`` folder) to the processes
    it starts: the task finds it on the path, after the zips, where ``PYTHONPATH`` put it, not
    inserted in front of them."""
    import os

    from pyspark import SparkFiles

    root = SparkFiles.getRootDirectory()
    paths = spark.sparkContext.environment["PYTHONPATH"].split(os.pathsep)
    assert root in paths and os.path.join(root, "streaming_job") in paths

    def where(_: Any) -> tuple[int, int]:
        import sys

        from pyspark import SparkFiles

        zips = [i for i, p in enumerate(sys.path) if p.endswith("pyspark.zip")]
        return sys.path.index(SparkFiles.getRootDirectory()), zips[0] if zips else -1

    directory, first_zip = spark.sparkContext.parallelize([0], 1).map(where).collect()[0]
    assert first_zip >= 0 and directory > first_zip


def test_the_static_data_source_look_up_is_answered_in_process(spark: Any) -> None:
    """Spark 4.2's JVM takes the answer (no data sources) where Spark keeps it, and a Python data
    source registered afterwards still plans and reads (its planners run as before)."""
    import sys

    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from widehouse.spark.static_sources import MANAGER, answer_static_lookup, scala_object

    jvm = spark.sparkContext._jvm
    manager = scala_object(jvm, MANAGER)
    getattr(manager, "dataSourceBuilders_$eq")(scala_object(jvm, "scala.None$"))  # as a new JVM has it
    assert manager.dataSourceBuilders().isEmpty()
    assert answer_static_lookup(spark, sys.executable)
    assert manager.dataSourceBuilders().toString() == "Some(Map())"
    assert answer_static_lookup(spark, sys.executable)  # answered once per JVM

    class Numbers(DataSource):
        @classmethod
        def name(cls) -> str:
            return "widehouse_test_numbers"

        def schema(self) -> str:
            return "n long"

        def reader(self, schema: Any) -> DataSourceReader:
            class Reader(DataSourceReader):
                def read(self, partition: InputPartition) -> Any:
                    yield from ((n,) for n in range(3))

            return Reader()

    spark.dataSource.register(Numbers)
    assert sorted(r.n for r in spark.read.format("widehouse_test_numbers").load().collect()) == [0, 1, 2]


def test_the_data_sources_planners_start_blas_single_threaded(spark: Any) -> None:
    """The Python processes the driver JVM starts (here a data source's read planner) start with one
    OpenBLAS thread: they import numpy and never use it, and OpenBLAS's thread per core spins at
    import. The planner's environment travels to the task in the partition it planned."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class PlannerEnv(DataSource):
        @classmethod
        def name(cls) -> str:
            return "widehouse_test_planner_env"

        def schema(self) -> str:
            return "openblas string, omp string"

        def reader(self, schema: Any) -> DataSourceReader:
            class Reader(DataSourceReader):
                def partitions(self) -> list[InputPartition]:
                    import os  # in the planner process

                    names = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")
                    return [InputPartition(tuple(os.environ.get(n) for n in names))]

                def read(self, partition: InputPartition) -> Any:
                    yield partition.value

            return Reader()

    spark.dataSource.register(PlannerEnv)
    [row] = spark.read.format("widehouse_test_planner_env").load().collect()
    assert row.openblas == "1" or row.omp, row  # ours, or the user's own choice left in place


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_the_sessions_python_processes_are_forked_from_its_fork_server(spark: Any) -> None:
    """The JVM runs the fork launcher as its Python: a data source's planner and a task's worker
    run in children of daemons forked by the driver's fork server, not in new interpreters."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from widehouse.spark import fork_server
    from widehouse.spark.static_sources import planner_python

    launcher = planner_python(spark)
    assert fork_server.is_launcher(launcher)
    [server] = [s for s in fork_server.running() if str(s.launcher) == launcher]

    class Lineage(DataSource):
        @classmethod
        def name(cls) -> str:
            return "widehouse_test_lineage"

        def schema(self) -> str:
            import os  # in the create_data_source daemon's child

            return f"planner_daemon_{os.getppid()} long"

        def reader(self, schema: Any) -> DataSourceReader:
            class Reader(DataSourceReader):
                def partitions(self) -> list[InputPartition]:
                    return [InputPartition(0)]

                def read(self, partition: InputPartition) -> Any:
                    import os  # in a task worker, forked by the worker daemon

                    yield (os.getppid(),)

            return Reader()

    spark.dataSource.register(Lineage)
    frame = spark.read.format("widehouse_test_lineage").load()
    planner_daemon = int(frame.schema.names[0].rsplit("_", 1)[1])
    [row] = frame.collect()
    worker_daemon = row[0]
    assert _parent(planner_daemon) == server.process.pid
    assert _parent(worker_daemon) == server.process.pid


def test_numpy_values_still_reach_the_jvm(spark: Any) -> None:
    # build_session swapped pyspark's NumPy converters for ones that import no test module
    import numpy as np
    from py4j.protocol import INPUT_CONVERTER

    from widehouse.spark.py4j_numpy import NumpyArrays, NumpyScalars

    kinds = {type(c) for c in INPUT_CONVERTER}
    assert {NumpyArrays, NumpyScalars} <= kinds
    jvm = spark.sparkContext._jvm
    assert jvm.java.util.Arrays.toString(np.array([3, 1, 2], dtype=np.int32)) == "[3, 1, 2]"
    assert jvm.java.util.Arrays.toString(np.array([0.5, 2.0])) == "[0.5, 2.0]"
    assert jvm.java.lang.Math.abs(np.int64(-3)) == 3


def test_a_driver_keeps_its_scratch_in_its_own_dir_and_removes_a_killed_drivers(tmp_path: Path) -> None:
    """Spark's local dir, the JVM's temp dir (a cluster job's fetched archive, Hive's resources) and
    the files dir lie in the process's own scratch under the state dir, never /tmp; a driver that
    starts removes the scratch of one killed before Spark's shutdown hook could."""
    state = tmp_path / "state"
    root = state / "spark" / "tmp"
    env = {**os.environ, "WIDEHOUSE_STATE_DIR": str(state)}
    dead = subprocess.Popen(
        [sys.executable, "-c", DEAD_DRIVER, str(root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert dead.stdout is not None
    dead_dir = Path(dead.stdout.readline().strip())
    os.kill(dead.pid, signal.SIGKILL)
    dead.wait(timeout=30)
    assert (dead_dir / "blockmgr-0").is_dir()

    driver = subprocess.run(
        [sys.executable, "-c", DRIVER], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert driver.returncode == 0, driver.stderr[-4000:]
    seen = json.loads(driver.stdout.strip().splitlines()[-1])
    assert not dead_dir.exists() and not Path(f"{dead_dir}.lock").exists()
    (scratch,) = [p for p in root.iterdir() if p.is_dir()]  # the driver's own (beside its lock)
    assert scratch.name.startswith("driver-")
    assert seen["local.dir"] == seen["java.io.tmpdir"] == str(scratch), seen
    assert Path(seen["files"]).parent.parent == scratch, seen  # <local dir>/spark-*/userFiles-*
    assert Path(seen["temp"]).parent == scratch, seen  # createTempDir(): <java.io.tmpdir>/spark-*

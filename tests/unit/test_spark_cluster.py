"""The cluster side of the Spark settings: what a job ships, which paths and modes are refused, and
the local standalone cluster as an optional service (pure logic; tests/cluster/ runs the real one)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from widehouse.errors import ConfigError
from widehouse.orchestration.launch import check_deploy_mode, submit_command
from widehouse.services import ServiceManager
from widehouse.services.spark_cluster import SCRUBBED, SparkMaster, SparkWorkers, spark_home
from widehouse.settings import Settings, load_settings
from widehouse.spark.session import check_cluster, spark_conf

CLUSTER = {
    "WIDEHOUSE_STATE_DIR": "/srv/wh",
    "WIDEHOUSE_SPARK_MASTER": "spark://10.0.0.5:7077",
    "WIDEHOUSE_SPARK_ARCHIVE": "hdfs:///wh/widehouse-env.tar.gz",
    "WIDEHOUSE_STREAM_CHECKPOINT_ROOT": "s3a://wh/checkpoints",
    "WIDEHOUSE_DELTA_ROOT": "s3a://wh/delta",
    "WIDEHOUSE_HIVE_WAREHOUSE": "s3a://wh/warehouse",
}


def _settings(**env: str) -> Settings:
    return load_settings({**CLUSTER, **env})


def test_a_cluster_job_ships_the_archive_and_runs_its_python() -> None:
    conf = spark_conf(_settings(), "app")
    assert conf["spark.archives"] == "hdfs:///wh/widehouse-env.tar.gz#env"
    assert conf["spark.pyspark.python"] == "./env/bin/python"
    assert "spark.submit.pyFiles" not in conf
    check_cluster(_settings())  # shipped code, shared storage: accepted


def test_the_wheel_over_the_cluster_python() -> None:
    settings = _settings(
        WIDEHOUSE_SPARK_ARCHIVE="none",
        WIDEHOUSE_SPARK_PY_FILES="hdfs:///wh/widehouse-0.1.0-py3-none-any.whl",
        WIDEHOUSE_SPARK_PYTHON="/opt/venv/bin/python",
    )
    conf = spark_conf(settings, "app")
    assert conf["spark.submit.pyFiles"] == "hdfs:///wh/widehouse-0.1.0-py3-none-any.whl"
    assert conf["spark.pyspark.python"] == "/opt/venv/bin/python"
    assert "spark.archives" not in conf
    check_cluster(settings)


def test_local_mode_ships_nothing() -> None:
    conf = spark_conf(load_settings({"WIDEHOUSE_STATE_DIR": "/srv/wh"}), "app")
    assert "spark.archives" not in conf and "spark.submit.pyFiles" not in conf


def test_a_cluster_job_without_shipped_code_is_refused() -> None:
    with pytest.raises(ConfigError, match="neither WIDEHOUSE_SPARK_ARCHIVE nor WIDEHOUSE_SPARK_PY_FILES"):
        check_cluster(_settings(WIDEHOUSE_SPARK_ARCHIVE="none"))


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("WIDEHOUSE_STREAM_CHECKPOINT_ROOT", "/srv/wh/checkpoints"),
        ("WIDEHOUSE_DELTA_ROOT", "file:///srv/wh/delta"),
        ("WIDEHOUSE_HIVE_WAREHOUSE", "/srv/wh/warehouse"),
    ],
)
def test_driver_local_paths_are_refused_unless_shared(variable: str, value: str) -> None:
    with pytest.raises(ConfigError, match=f"{variable}={value} is a path on the driver's disk"):
        check_cluster(_settings(**{variable: value}))
    check_cluster(_settings(**{variable: value, "WIDEHOUSE_SHARED_PATHS": "true"}))
    check_cluster(load_settings({**CLUSTER, variable: value, "WIDEHOUSE_SPARK_MASTER": "local[2]"}))


def test_bad_shipping_settings_name_the_variable() -> None:
    with pytest.raises(ConfigError, match="WIDEHOUSE_SPARK_ARCHIVE"):
        _settings(WIDEHOUSE_SPARK_ARCHIVE="env.tar.gz")  # relative: no node could find it
    with pytest.raises(ConfigError, match="WIDEHOUSE_SPARK_PYTHON"):
        _settings(WIDEHOUSE_SPARK_PYTHON="python -u")
    with pytest.raises(ConfigError, match="WIDEHOUSE_SHARED_PATHS"):
        _settings(WIDEHOUSE_SHARED_PATHS="maybe")


@pytest.mark.parametrize("master", ["spark://10.0.0.5:7077", "local[2]"])
def test_cluster_deploy_mode_is_refused_where_spark_refuses_it(master: str) -> None:
    settings = _settings(WIDEHOUSE_SPARK_MASTER=master, WIDEHOUSE_SUPERVISOR_MODE="cluster")
    with pytest.raises(ConfigError, match=r"WIDEHOUSE_SUPERVISOR_MODE=cluster .* WIDEHOUSE_SPARK_MASTER="):
        check_deploy_mode(settings)
    with pytest.raises(ConfigError, match="WIDEHOUSE_SUPERVISOR_MODE"):
        submit_command(settings, "g001", "hdfs:///wh/plan.json", "hdfs:///wh/stream_wide.py")
    check_deploy_mode(_settings(WIDEHOUSE_SPARK_MASTER=master))  # local mode: client-mode drivers


def test_a_yarn_submission_ships_the_archive_for_driver_and_executors() -> None:
    settings = _settings(WIDEHOUSE_SPARK_MASTER="yarn", WIDEHOUSE_SUPERVISOR_MODE="cluster")
    command = submit_command(settings, "g001", "hdfs:///wh/plan.json", "hdfs:///wh/stream_wide.py")
    at = command.index("--archives")
    assert command[at + 1] == "hdfs:///wh/widehouse-env.tar.gz#env"
    assert "spark.pyspark.python=./env/bin/python" in command
    assert "spark.pyspark.driver.python=./env/bin/python" in command


def test_the_local_cluster_is_optional_and_named_spark(tmp_path: Path) -> None:
    local = load_settings({"WIDEHOUSE_STATE_DIR": str(tmp_path)}).local
    manager = ServiceManager(local)
    assert {s.name for s in manager.select(None, with_dependencies=True)} == {
        "pulsar",
        "hbase",
        "hbase-thrift",
        "clickhouse",
        "metastore",
    }
    assert [s.name for s in manager.select(["spark"], with_dependencies=True)] == [
        "spark-master",
        "spark-worker",
    ]
    assert [s.name for s in manager.select(["spark-worker"], with_dependencies=True)] == [
        "spark-master",
        "spark-worker",
    ]
    assert local.spark_master_url == "spark://127.0.0.1:17077"


def test_the_workers_run_outside_the_checkout_venv(tmp_path: Path) -> None:
    local = load_settings(
        {"WIDEHOUSE_STATE_DIR": str(tmp_path), "WIDEHOUSE_SPARK_WORKERS": "2", "PATH": "/usr/bin"}
    ).local
    workers = SparkWorkers(local)
    argv = workers.command()
    assert argv[:2] == ("/bin/sh", "-c") and argv[2].count("org.apache.spark.deploy.worker.Worker") == 2
    for name in SCRUBBED:
        assert f"'-u' '{name}'" in argv[2]
    assert str(workers.work_dir(0)) in argv[2] and str(workers.work_dir(1)) in argv[2]
    master = SparkMaster(local)
    assert master.command()[-4:] == ("--port", "17077", "--webui-port", "17080")
    assert str(Path(sys.prefix) / "bin") not in master.environment()["PATH"].split(":")


def test_every_executor_requirement_is_pinned() -> None:
    from widehouse.spark.shipping import EXECUTOR_REQUIREMENTS

    pins = {
        line.split("==")[0].strip().lower()
        for line in (Path(__file__).parents[2] / "constraints.txt").read_text().splitlines()
        if "==" in line and not line.lstrip().startswith("#")
    }
    assert {r.lower() for r in EXECUTOR_REQUIREMENTS} <= pins


def test_each_workers_executors_keep_their_scratch_in_its_own_dir_emptied_on_start(tmp_path: Path) -> None:
    """Not /tmp, where executors stopped with their worker left 100-400 MB each behind."""
    local = load_settings({"WIDEHOUSE_STATE_DIR": str(tmp_path), "WIDEHOUSE_SPARK_WORKERS": "2"}).local
    workers = SparkWorkers(local)
    script = workers.command()[2]
    for i in (0, 1):
        local_dir = tmp_path / "services" / "spark-worker" / f"worker-{i}" / "local"
        assert workers.local_dir(i) == local_dir
        assert f"'SPARK_LOCAL_DIRS={local_dir}' 'JAVA_TOOL_OPTIONS=-Djava.io.tmpdir={local_dir}'" in script
    single = SparkWorkers(load_settings({"WIDEHOUSE_STATE_DIR": str(tmp_path / "one")}).local).command()
    at = single.index(str(spark_home() / "bin" / "spark-class"))
    assert single[at - 2].startswith("SPARK_LOCAL_DIRS=") and single[at - 1].startswith("JAVA_TOOL_OPTIONS=")
    opts = workers.environment()["SPARK_WORKER_OPTS"].split()
    assert "-Dspark.worker.cleanup.enabled=true" in opts
    assert "-Dspark.worker.cleanup.appDataTtl=3600" in opts
    leftover = workers.local_dir(1) / "spark-0a" / "executor-1b" / "blockmgr-2c"
    leftover.mkdir(parents=True)
    workers.prepare()
    assert [p for i in (0, 1) for p in workers.local_dir(i).iterdir()] == []
    assert workers.work_dir(0).is_dir()

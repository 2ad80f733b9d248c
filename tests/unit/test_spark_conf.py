"""The Spark settings Widehouse applies (pure function; no Spark started here)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from widehouse.errors import SetupError
from widehouse.settings import load_settings
from widehouse.spark.session import check_jars, spark_conf


def test_local_conf_has_delta_hive_and_small_footprint(tmp_path: Path) -> None:
    s = load_settings({"WIDEHOUSE_STATE_DIR": str(tmp_path), "WIDEHOUSE_SPARK_JARS": "/j/delta.jar"})
    conf = spark_conf(s, "app")
    assert conf["spark.master"] == "local[*]"
    assert conf["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
    assert conf["spark.sql.catalog.spark_catalog"] == "org.apache.spark.sql.delta.catalog.DeltaCatalog"
    assert conf["spark.sql.catalogImplementation"] == "hive"
    # Hive's own insert takes partitions from the data only as the Hadoop conf allows
    assert conf["spark.hadoop.hive.exec.dynamic.partition.mode"] == "nonstrict"
    # the local `metastore` service, shared by every Spark process; no in-process Derby
    assert conf["spark.hadoop.hive.metastore.uris"] == "thrift://127.0.0.1:9083"
    assert "spark.hadoop.javax.jdo.option.ConnectionURL" not in conf
    assert conf["spark.sql.warehouse.dir"] == str(tmp_path / "hive" / "warehouse")
    assert conf["spark.sql.shuffle.partitions"] == "4"
    assert conf["spark.ui.enabled"] == "false"
    assert conf["spark.sql.session.timeZone"] == "UTC"
    assert conf["spark.jars"] == "/j/delta.jar"
    assert conf["spark.pyspark.python"] == sys.executable
    # a stream's groups share the cores (each runs in a pool of its own)
    assert conf["spark.scheduler.mode"] == "FAIR"


def test_a_user_can_put_the_scheduler_back_to_fifo(tmp_path: Path) -> None:
    s = load_settings(
        {"WIDEHOUSE_STATE_DIR": str(tmp_path), "WIDEHOUSE_SPARK_CONF": "spark.scheduler.mode=FIFO"}
    )
    assert spark_conf(s, "app")["spark.scheduler.mode"] == "FIFO"


def test_embedded_metastore_is_an_explicit_opt_in(tmp_path: Path) -> None:
    s = load_settings(
        {
            "WIDEHOUSE_STATE_DIR": str(tmp_path),
            "WIDEHOUSE_SPARK_JARS": "/j/delta.jar",
            "WIDEHOUSE_HIVE_METASTORE_URI": "Embedded",
        }
    )
    assert s.hive.embedded
    conf = spark_conf(s, "app")
    assert "spark.hadoop.hive.metastore.uris" not in conf
    assert conf["spark.hadoop.javax.jdo.option.ConnectionURL"] == (
        f"jdbc:derby:;databaseName={tmp_path}/hive/metastore_db;create=true"
    )
    assert conf["spark.driver.extraJavaOptions"] == f"-Dderby.system.home={tmp_path}/hive"


def test_the_local_metastore_port_sets_the_default_uri(tmp_path: Path) -> None:
    s = load_settings({"WIDEHOUSE_STATE_DIR": str(tmp_path), "WIDEHOUSE_HIVE_METASTORE_PORT": "19083"})
    assert s.hive.metastore_uri == s.local.hive_metastore_uri == "thrift://127.0.0.1:19083"
    assert s.local.hive_warehouse_dir == s.hive.warehouse_dir == str(tmp_path / "hive" / "warehouse")
    assert spark_conf(s, "app")["spark.hadoop.hive.metastore.uris"] == "thrift://127.0.0.1:19083"


def test_cluster_conf_points_everything_elsewhere_and_user_conf_wins(tmp_path: Path) -> None:
    s = load_settings(
        {
            "WIDEHOUSE_STATE_DIR": str(tmp_path),
            "WIDEHOUSE_SPARK_MASTER": "spark://m:7077",
            "WIDEHOUSE_HIVE_METASTORE_URI": "thrift://ms:9083",
            "WIDEHOUSE_SPARK_JARS": "",
            "WIDEHOUSE_SPARK_CONF": "spark.sql.shuffle.partitions=64;spark.executor.memory=8g",
        }
    )
    conf = spark_conf(s, "app", overrides={"spark.executor.memory": "16g"})
    assert conf["spark.master"] == "spark://m:7077"
    assert conf["spark.hadoop.hive.metastore.uris"] == "thrift://ms:9083"
    assert "spark.hadoop.javax.jdo.option.ConnectionURL" not in conf
    assert "spark.jars" not in conf
    assert "spark.pyspark.python" not in conf  # the cluster decides its interpreter
    assert conf["spark.sql.shuffle.partitions"] == "64"  # WIDEHOUSE_SPARK_CONF beats defaults
    assert conf["spark.executor.memory"] == "16g"  # an explicit override beats everything


def test_missing_delta_jars_point_at_make_setup(tmp_path: Path) -> None:
    s = load_settings({"WIDEHOUSE_STATE_DIR": str(tmp_path), "WIDEHOUSE_VENDOR_DIR": str(tmp_path / "none")})
    with pytest.raises(SetupError, match=r"no Delta jars .* run `make setup`"):
        check_jars(s)
    s = load_settings({"WIDEHOUSE_STATE_DIR": str(tmp_path), "WIDEHOUSE_SPARK_JARS": "/nope/delta.jar"})
    with pytest.raises(SetupError, match=r"Spark jars missing: /nope/delta\.jar"):
        check_jars(s)


def test_blas_is_single_threaded_in_spark_python_processes_unless_chosen() -> None:
    from widehouse.spark.session import blas_single_threaded

    environ: dict[str, str] = {"PATH": "/bin"}
    blas_single_threaded(environ)
    assert environ == {"PATH": "/bin", "OPENBLAS_NUM_THREADS": "1"}
    for chosen in ({"OPENBLAS_NUM_THREADS": "4"}, {"OMP_NUM_THREADS": "2"}):
        environ = dict(chosen)
        blas_single_threaded(environ)
        assert environ == chosen

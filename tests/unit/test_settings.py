from __future__ import annotations

import dataclasses
import datetime as dt
import socket
import traceback
from pathlib import Path
from typing import Any

import pytest

from widehouse.errors import ConfigError, PulsarError
from widehouse.settings import (
    CLICKHOUSE_DSN_DEFAULT,
    DERIVED_FIELDS,
    LOCAL_SERVER_CLICKHOUSE_DSN,
    VARIABLES,
    ClickHouseSettings,
    Derived,
    LocalServicesSettings,
    PlannerSettings,
    PulsarSettings,
    Settings,
    SparkSettings,
    StreamSettings,
    describe,
    format_value,
    load_settings,
    mask_url,
)

# Fixed, non-existent paths: loading never touches the disk for them, so the tests are pure.
BASE = {
    "WIDEHOUSE_STATE_DIR": "/srv/base/state",
    "WIDEHOUSE_VENDOR_DIR": "/srv/base/vendor",
    "WIDEHOUSE_SCHEMAS_DIR": "/srv/base/schemas",
}

# For every variable: a valid value that is not its default, and what it parses to.
SAMPLES: dict[str, tuple[str, Any]] = {
    "WIDEHOUSE_STATE_DIR": ("/srv/other/state", Path("/srv/other/state")),
    "WIDEHOUSE_VENDOR_DIR": ("/srv/other/vendor", Path("/srv/other/vendor")),
    "WIDEHOUSE_SCHEMAS_DIR": ("/srv/other/schemas", Path("/srv/other/schemas")),
    "WIDEHOUSE_PULSAR_SERVICE_URL": ("pulsar+ssl://pulsar.prod:6651/", "pulsar+ssl://pulsar.prod:6651"),
    "WIDEHOUSE_PULSAR_ADMIN_URL": ("https://pulsar.prod:8443", "https://pulsar.prod:8443"),
    "WIDEHOUSE_PULSAR_AUTH_TOKEN": ("eyJhbGciOi.payload.sig", "eyJhbGciOi.payload.sig"),
    "WIDEHOUSE_PULSAR_AUTH": ("Token", "token"),
    "WIDEHOUSE_CLICKHOUSE_DSN": (
        "http://wh:pw@ch.prod:8123/analytics",
        "http://wh:pw@ch.prod:8123/analytics",
    ),
    "WIDEHOUSE_CLICKHOUSE_DATABASE": ("analytics", "analytics"),
    "WIDEHOUSE_CLICKHOUSE_CLUSTER": ("prod-ch.eu_1", "prod-ch.eu_1"),
    "WIDEHOUSE_CLICKHOUSE_COMPRESSION": (" ZSTD ", "zstd"),
    "WIDEHOUSE_DELTA_ROOT": ("s3a://lake/widehouse", "s3a://lake/widehouse"),
    "WIDEHOUSE_DELTA_BRONZE_RETENTION_SECONDS": ("3600", 3600),
    "WIDEHOUSE_DELTA_BRONZE_UPKEEP_SECONDS": ("0", 0.0),
    "WIDEHOUSE_DELTA_BRONZE_COMPACT_FILES": ("64", 64),
    "WIDEHOUSE_HBASE_HOST": ("hbase-thrift.prod", "hbase-thrift.prod"),
    "WIDEHOUSE_HBASE_PORT": ("19090", 19090),
    "WIDEHOUSE_HBASE_TIMEOUT_MS": ("5000", 5000),
    "WIDEHOUSE_HBASE_SALT_BUCKETS": ("32", 32),
    "WIDEHOUSE_HBASE_REFRESH_WORKERS": ("7", 7),
    "WIDEHOUSE_HBASE_TABLE_PREFIX": ("widehouse:", "widehouse:"),
    "WIDEHOUSE_HBASE_ZOOKEEPER": ("zk1:2181, zk2:2181", "zk1:2181,zk2:2181"),
    "WIDEHOUSE_HIVE_METASTORE_URI": ("thrift://metastore.prod:9083", "thrift://metastore.prod:9083"),
    "WIDEHOUSE_HIVE_WAREHOUSE": ("hdfs:///warehouse", "hdfs:///warehouse"),
    "WIDEHOUSE_SPARK_MASTER": ("local[2]", "local[2]"),
    "WIDEHOUSE_SPARK_SHUFFLE_PARTITIONS": ("64", 64),
    "WIDEHOUSE_SPARK_UI": ("yes", True),
    "WIDEHOUSE_SPARK_DRIVER_MEMORY": ("4G", "4g"),
    "WIDEHOUSE_SPARK_JARS": ("/j/a.jar, /j/b.jar", ("/j/a.jar", "/j/b.jar")),
    "WIDEHOUSE_SPARK_CONF": ("spark.a=1;spark.b=x=y", (("spark.a", "1"), ("spark.b", "x=y"))),
    "WIDEHOUSE_SPARK_ARCHIVE": ("hdfs:///wh/env.tar.gz", "hdfs:///wh/env.tar.gz"),
    "WIDEHOUSE_SPARK_PY_FILES": ("/w/widehouse.whl", ("/w/widehouse.whl",)),
    "WIDEHOUSE_SPARK_PYTHON": ("/opt/venv/bin/python", "/opt/venv/bin/python"),
    "WIDEHOUSE_SPARK_CLASS_ARCHIVE_DIR": ("/opt/widehouse/cds", "/opt/widehouse/cds"),
    "WIDEHOUSE_SPARK_LAUNCH_PLANS_DIR": ("/opt/widehouse/launch", "/opt/widehouse/launch"),
    "WIDEHOUSE_SPARK_LEAN_HOME_DIR": ("off", None),
    "WIDEHOUSE_SPARK_FORKS_DIR": ("off", None),
    "WIDEHOUSE_SPARK_DRIVER_JIT": ("late-c2", "late-c2"),
    "WIDEHOUSE_SHARED_PATHS": ("true", True),
    "WIDEHOUSE_SPARK_MASTER_PORT": ("27077", 27077),
    "WIDEHOUSE_SPARK_MASTER_UI_PORT": ("27080", 27080),
    "WIDEHOUSE_SPARK_WORKERS": ("2", 2),
    "WIDEHOUSE_SPARK_WORKER_CORES": ("4", 4),
    "WIDEHOUSE_SPARK_WORKER_MEMORY": ("4G", "4g"),
    "WIDEHOUSE_JAVA_HOME": ("/opt/jdk-17", "/opt/jdk-17"),
    "WIDEHOUSE_PULSAR_BROKER_PORT": ("16650", 16650),
    "WIDEHOUSE_PULSAR_WEB_PORT": ("18090", 18090),
    "WIDEHOUSE_PULSAR_HEAP": ("1g", "1g"),
    "WIDEHOUSE_PULSAR_DIRECT_MEMORY": ("256M", "256m"),
    "WIDEHOUSE_PULSAR_JIT": (" Tiered ", "tiered"),
    "WIDEHOUSE_HBASE_ZK_PORT": ("12181", 12181),
    "WIDEHOUSE_HBASE_MASTER_PORT": ("26000", 26000),
    "WIDEHOUSE_HBASE_MASTER_INFO_PORT": ("26010", 26010),
    "WIDEHOUSE_HBASE_REGIONSERVER_PORT": ("26020", 26020),
    "WIDEHOUSE_HBASE_HEAP": ("1g", "1g"),
    "WIDEHOUSE_HBASE_THRIFT_PORT": ("19091", 19091),
    "WIDEHOUSE_HBASE_THRIFT_INFO_PORT": ("19095", 19095),
    "WIDEHOUSE_HBASE_THRIFT_HEAP": ("512m", "512m"),
    "WIDEHOUSE_CLICKHOUSE_PORT": ("18123", 18123),
    "WIDEHOUSE_CLICKHOUSE_USER": ("analyst", "analyst"),
    "WIDEHOUSE_CLICKHOUSE_PASSWORD": ("s3cret pass", "s3cret pass"),
    "WIDEHOUSE_CLICKHOUSE_HANDLES": ("8", 8),
    "WIDEHOUSE_SERVICE_START_TIMEOUT": ("2.5", 2.5),
    "WIDEHOUSE_HIVE_METASTORE_PORT": ("19083", 19083),
    "WIDEHOUSE_HIVE_METASTORE_HEAP": ("1g", "1g"),
    "WIDEHOUSE_PLAN_SLOT_CAPACITY": ("5e6", 5e6),
    "WIDEHOUSE_PLAN_MESSAGE_COST": ("0", 0.0),
    "WIDEHOUSE_PLAN_TARGET_FILL": ("0.9", 0.9),
    "WIDEHOUSE_PLAN_ISOLATION": ("0.3", 0.3),
    "WIDEHOUSE_PLAN_PARTITION_CAPACITY": ("1000000", 1e6),
    "WIDEHOUSE_PLAN_MAX_PARTITIONS": ("8", 8),
    "WIDEHOUSE_PLAN_MAX_GROUP_TOPICS": ("50", 50),
    "WIDEHOUSE_PLAN_IMBALANCE": ("0.1", 0.1),
    "WIDEHOUSE_PLAN_SMOOTHING": ("3", 3),
    "WIDEHOUSE_TENANT_SUFFIX": ("staging", "staging"),
    "WIDEHOUSE_STREAM_APP": ("wh-prod", "wh-prod"),
    "WIDEHOUSE_STREAM_CHECKPOINT_ROOT": ("s3a://lake/checkpoints", "s3a://lake/checkpoints"),
    "WIDEHOUSE_STREAM_TRIGGER_SECONDS": ("0.5", 0.5),
    "WIDEHOUSE_STREAM_MAX_MESSAGES": ("1000", 1000),
    "WIDEHOUSE_STREAM_CUT_SLACK": ("0.25", 0.25),
    "WIDEHOUSE_STREAM_SINKS": ("delta", ("delta",)),
    "WIDEHOUSE_STREAM_STOP_GRACE_SECONDS": ("5", 5.0),
    "WIDEHOUSE_STREAM_MAX_RESTARTS": ("0", 0),
    "WIDEHOUSE_STREAM_DEAD_LETTER": ("on", True),
    "WIDEHOUSE_STREAM_CONTROL_TOPIC": ("persistent://ops/ctl/marks", "persistent://ops/ctl/marks"),
    "WIDEHOUSE_AIRFLOW_PORT": ("18080", 18080),
    "WIDEHOUSE_AIRFLOW_WORKER_LOG_PORT": ("18793", 18793),
    "WIDEHOUSE_AIRFLOW_TRIGGERER_LOG_PORT": ("18794", 18794),
    "WIDEHOUSE_AIRFLOW_USER": ("ops", "ops"),
    "WIDEHOUSE_AIRFLOW_PASSWORD": ("an0ther pass", "an0ther pass"),
    "WIDEHOUSE_AIRFLOW_DAGS_DIR": ("/srv/other/dags", Path("/srv/other/dags")),
    "WIDEHOUSE_AIRFLOW_CONNECTIONS_FILE": ("/srv/other/conns.json", Path("/srv/other/conns.json")),
    "WIDEHOUSE_AIRFLOW_START": ("2026-11-22T09+02:00", dt.datetime(2026, 11, 22, 7, tzinfo=dt.UTC)),
    "WIDEHOUSE_SUPERVISOR_MODE": ("cluster", "cluster"),
    "WIDEHOUSE_SUPERVISOR_STALE_SECONDS": ("60", 60.0),
    "WIDEHOUSE_SUPERVISOR_STARTUP_SECONDS": ("90", 90.0),
    "WIDEHOUSE_SUPERVISOR_BACKOFF_SECONDS": ("5", 5.0),
    "WIDEHOUSE_SUPERVISOR_BACKOFF_MAX_SECONDS": ("600", 600.0),
    "WIDEHOUSE_SUPERVISOR_MAX_FAILURES": ("2", 2),
    "WIDEHOUSE_SPARK_SUBMIT": ("/opt/spark/bin/spark-submit", "/opt/spark/bin/spark-submit"),
    "WIDEHOUSE_STREAM_RESTART_BACKOFF_SECONDS": ("0.25", 0.25),
    "WIDEHOUSE_STREAM_RESTART_BACKOFF_MAX_SECONDS": ("600", 600.0),
}

BY_NAME = {v.name: v for v in VARIABLES}


def leaves(value: object, prefix: str = "") -> dict[str, Any]:
    """Every leaf field of a settings object, by dotted path (``local.pulsar_broker_port``)."""
    if not dataclasses.is_dataclass(value) or isinstance(value, type):
        return {prefix: value}
    found: dict[str, Any] = {}
    for f in dataclasses.fields(value):
        found |= leaves(getattr(value, f.name), f"{prefix}{f.name}" if not prefix else f"{prefix}.{f.name}")
    return found


def dependents(name: str) -> set[str]:
    """Targets whose default follows (directly or not) from variable ``name``: the documented ones."""
    derived = [(v.target, v.name, v.default) for v in VARIABLES if isinstance(v.default, Derived)]
    derived += [(d.target, None, d.default) for d in DERIVED_FIELDS]
    names, targets = {name}, set()
    changed = True
    while changed:
        changed = False
        for target, var_name, default in derived:
            if target not in targets and names & set(default.uses):
                targets.add(target)
                if var_name is not None:
                    names.add(var_name)
                changed = True
    return targets


# -- one declaration per variable ----------------------------------------------------------------


def test_every_variable_has_a_sample() -> None:
    assert set(SAMPLES) == set(BY_NAME)


@pytest.mark.parametrize("name", list(BY_NAME))
def test_every_variable_sets_its_target_and_only_what_follows_from_it(name: str) -> None:
    raw, expected = SAMPLES[name]
    before = leaves(load_settings(BASE))
    after = leaves(load_settings({**BASE, name: raw}))
    target = BY_NAME[name].target
    assert before[target] != expected, "the sample must not be the default"
    assert after[target] == expected
    changed = {path for path in before if before[path] != after[path]}
    assert changed - {target} <= dependents(name), changed


def test_every_variable_has_a_target_and_every_field_is_reached() -> None:
    fields = set(leaves(load_settings(BASE)))
    targets = [v.target for v in VARIABLES]
    derived = [d.target for d in DERIVED_FIELDS]
    assert len(set(targets)) == len(targets), "two variables set the same field"
    assert set(targets) <= fields, set(targets) - fields
    assert set(derived) <= fields and not set(derived) & set(targets)
    assert set(targets) | set(derived) == fields, fields - set(targets) - set(derived)


def test_derived_defaults_name_only_known_inputs() -> None:
    for default in [v.default for v in VARIABLES if isinstance(v.default, Derived)] + [
        d.default for d in DERIVED_FIELDS
    ]:
        unknown = [u for u in default.uses if u not in BY_NAME and u != "JAVA_HOME"]
        assert unknown == [], default.doc


def test_fixed_defaults_are_what_loading_gives_and_round_trip_through_their_parser() -> None:
    loaded = leaves(load_settings(BASE))
    for v in VARIABLES:
        if isinstance(v.default, Derived):
            continue
        assert loaded[v.target] == v.default, v.name
        if v.documented_default.startswith("("):
            continue  # "(none)": unset is the only way to get it
        assert v.parse(v.documented_default) == v.default, v.name


def test_dataclass_defaults_come_from_the_table() -> None:
    fixed = {v.target: v.default for v in VARIABLES if not isinstance(v.default, Derived)}
    groups = {f.name: f.type for f in dataclasses.fields(Settings)}
    allowed_elsewhere = {
        "local.java_home": None,  # None = java on PATH, what JAVA_HOME unset gives
        "hbase.zookeeper": "127.0.0.1:2181",  # what the default ZooKeeper port gives
        "local.clickhouse_password": None,  # none until `widehouse services up` generates one
        "pulsar.auth_token": None,  # none unless WIDEHOUSE_PULSAR_AUTH=token and its up made one
        "airflow.password": None,  # none until `widehouse airflow up` generates one
        "local.hive_warehouse_dir": None,  # loading derives it from WIDEHOUSE_HIVE_WAREHOUSE
        "spark.class_archive_dir": None,  # no archive; loading derives <vendor>/spark-cds
        "spark.launch_plans_dir": None,  # spark-submit; loading derives <vendor>/spark-launch
        "spark.lean_home_dir": None,  # Spark's home as it is; loading derives <vendor>/spark-lean
        "spark.forks_dir": None,  # cold Python processes; loading derives <vendor>/spark-forks
    }
    for group in groups:
        cls = type(getattr(load_settings(BASE), group))
        if not dataclasses.is_dataclass(cls):
            continue
        for f in dataclasses.fields(cls):
            if f.default is dataclasses.MISSING:
                continue
            target = f"{group}.{f.name}"
            expected = allowed_elsewhere[target] if target in allowed_elsewhere else fixed[target]
            assert f.default == expected, target
    assert PlannerSettings() == load_settings(BASE).planner


def test_documented_defaults() -> None:
    doc = {v.name: v.documented_default for v in VARIABLES}
    assert doc["WIDEHOUSE_DELTA_ROOT"] == "<state>/delta"
    assert doc["WIDEHOUSE_CLICKHOUSE_DSN"] == "http://<user>:<password>@127.0.0.1:<port>/<database>"
    assert doc["WIDEHOUSE_PLAN_SLOT_CAPACITY"] == "46000000"
    assert doc["WIDEHOUSE_PLAN_TARGET_FILL"] == "0.8"
    assert doc["WIDEHOUSE_STREAM_SINKS"] == "clickhouse,delta"
    assert doc["WIDEHOUSE_SPARK_UI"] == "false"
    assert doc["WIDEHOUSE_HIVE_METASTORE_URI"] == "thrift://127.0.0.1:<hive metastore port>"
    assert doc["WIDEHOUSE_PULSAR_AUTH_TOKEN"].startswith("(none)")
    assert format_value(180.0) == "180" and format_value(()) == "(none)"


# -- behaviour of the defaults and special cases -------------------------------------------------


def test_defaults_describe_local_mode(tmp_path: Path) -> None:
    s = load_settings({"WIDEHOUSE_STATE_DIR": str(tmp_path)})
    assert s.state_dir == tmp_path
    assert s.local.state_dir == tmp_path
    assert s.pulsar.service_url == "pulsar://127.0.0.1:6650"
    assert s.pulsar.admin_url == "http://127.0.0.1:8090"
    assert s.pulsar.auth_token is None
    assert s.clickhouse.dsn == "http://widehouse@127.0.0.1:8123/wh"  # the local service, no password yet
    assert not s.clickhouse.embedded  # the local service, over HTTP
    assert s.clickhouse.database == "wh"
    assert s.delta.root == str(tmp_path / "delta")
    assert (s.hbase.host, s.hbase.port) == ("127.0.0.1", 9090)
    assert s.hive.metastore_uri == "thrift://127.0.0.1:9083"  # the local `metastore` service
    assert s.hive.metastore_db_dir == str(tmp_path / "hive" / "metastore_db")
    assert s.hive.warehouse_dir == str(tmp_path / "hive" / "warehouse")
    assert s.spark.master == "local[*]" and s.spark.is_local
    assert s.spark.shuffle_partitions == 4
    assert s.spark.ui_enabled is False
    assert s.spark.local_dir == str(tmp_path / "spark" / "tmp")
    assert s.stream.checkpoint("g1") == f"{tmp_path}/checkpoints/widehouse/g1"
    assert (s.local.clickhouse_port, s.local.clickhouse_user, s.local.clickhouse_handles) == (
        8123,
        "widehouse",
        4,
    )
    assert s.local.clickhouse_password is None  # nothing generated in this state dir: no constant
    assert s.local.clickhouse_url == "http://widehouse@127.0.0.1:8123"
    assert s.airflow.password is None


def test_local_ports_drive_default_urls(tmp_path: Path) -> None:
    s = load_settings(
        {
            "WIDEHOUSE_STATE_DIR": str(tmp_path),
            "WIDEHOUSE_PULSAR_BROKER_PORT": "16650",
            "WIDEHOUSE_PULSAR_WEB_PORT": "18090",
            "WIDEHOUSE_HBASE_THRIFT_PORT": "19090",
        }
    )
    assert s.pulsar.service_url == "pulsar://127.0.0.1:16650"
    assert s.pulsar.admin_url == "http://127.0.0.1:18090"
    assert s.hbase.port == 19090


def test_cluster_settings(tmp_path: Path) -> None:
    s = load_settings(
        {
            "WIDEHOUSE_STATE_DIR": str(tmp_path),
            "WIDEHOUSE_PULSAR_SERVICE_URL": "pulsar+ssl://pulsar.prod:6651",
            "WIDEHOUSE_PULSAR_ADMIN_URL": "https://pulsar.prod:8443/",
            "WIDEHOUSE_PULSAR_AUTH_TOKEN": "tok",
            "WIDEHOUSE_CLICKHOUSE_DSN": "https://wh:secret@ch.prod:8443/analytics",
            "WIDEHOUSE_DELTA_ROOT": "s3a://lake/widehouse",
            "WIDEHOUSE_HBASE_HOST": "hbase-thrift.prod",
            "WIDEHOUSE_HBASE_PORT": "9090",
            "WIDEHOUSE_HIVE_METASTORE_URI": "thrift://metastore.prod:9083",
            "WIDEHOUSE_SPARK_MASTER": "spark://spark-master:7077",
            "WIDEHOUSE_SPARK_JARS": "",
            "WIDEHOUSE_SPARK_CONF": "spark.executor.memory=4g; spark.executor.cores=2\nspark.x.y=a=b",
        }
    )
    assert s.pulsar.admin_url == "https://pulsar.prod:8443"
    assert s.pulsar.auth_token == "tok"
    assert not s.clickhouse.embedded
    assert s.clickhouse.display_dsn == "https://wh:***@ch.prod:8443/analytics"
    assert s.delta.path("silver", "user_hourly") == "s3a://lake/widehouse/silver/user_hourly"
    assert s.hive.metastore_uri == "thrift://metastore.prod:9083"
    assert not s.spark.is_local
    assert s.spark.jars == ()
    assert s.spark.extra_conf == (
        ("spark.executor.memory", "4g"),
        ("spark.executor.cores", "2"),
        ("spark.x.y", "a=b"),
    )


def test_spark_jars_default_to_the_vendor_dir_unless_set_empty(tmp_path: Path) -> None:
    (tmp_path / "delta").mkdir()
    (tmp_path / "delta" / "delta-spark.jar").write_text("")
    env = {**BASE, "WIDEHOUSE_VENDOR_DIR": str(tmp_path)}
    assert load_settings(env).spark.jars == (str(tmp_path / "delta" / "delta-spark.jar"),)
    assert load_settings({**env, "WIDEHOUSE_SPARK_JARS": ""}).spark.jars == ()
    assert load_settings({**env, "WIDEHOUSE_SPARK_JARS": "  "}).spark.jars == ()


def test_java_home_falls_back_to_java_home() -> None:
    assert load_settings(BASE).local.java_home is None
    assert load_settings({**BASE, "JAVA_HOME": "/usr/lib/jvm/17"}).local.java_home == "/usr/lib/jvm/17"
    both = {**BASE, "JAVA_HOME": "/usr/lib/jvm/17", "WIDEHOUSE_JAVA_HOME": "/opt/jdk-21"}
    assert load_settings(both).local.java_home == "/opt/jdk-21"


def test_blank_values_mean_default(tmp_path: Path) -> None:
    s = load_settings({"WIDEHOUSE_STATE_DIR": str(tmp_path), "WIDEHOUSE_SPARK_MASTER": "  "})
    assert s.spark.master == "local[*]"


def test_settings_are_frozen(tmp_path: Path) -> None:
    s = load_settings({"WIDEHOUSE_STATE_DIR": str(tmp_path)})
    with pytest.raises(AttributeError):
        s.spark.master = "yarn"  # type: ignore[misc]


def test_local_clickhouse_url_quotes_the_password(tmp_path: Path) -> None:
    local = LocalServicesSettings(
        state_dir=tmp_path, vendor_dir=tmp_path, clickhouse_password="p@ss:/w?#", clickhouse_port=18123
    )
    assert local.clickhouse_url == "http://widehouse:p%40ss%3A%2Fw%3F%23@127.0.0.1:18123"
    assert "p@ss" not in repr(local)


@pytest.mark.parametrize(
    ("dsn", "compression", "expected"),
    [
        ("http://wh:pw@127.0.0.1:8123/wh", "auto", None),
        ("http://wh:pw@127.8.0.1:8123/wh", "auto", None),
        ("http://wh:pw@localhost:8123/wh", "auto", None),
        ("http://wh:pw@[::1]:8123/wh", "auto", None),
        ("http://wh:pw@ch.prod:8123/wh", "auto", "lz4"),
        ("https://wh:pw@10.0.0.7:8443/wh", "auto", "lz4"),
        ("http://wh:pw@127.0.0.1:8123/wh", "zstd", "zstd"),
        ("http://wh:pw@127.0.0.1:8123/wh", "lz4", "lz4"),
        ("http://wh:pw@ch.prod:8123/wh", "none", None),
    ],
)
def test_clickhouse_wire_compression_is_off_on_loopback_unless_set(
    dsn: str, compression: str, expected: str | None
) -> None:
    assert ClickHouseSettings(dsn, compression=compression).wire_compression() == expected


def test_the_default_dsn_is_the_local_service() -> None:
    env = {**BASE, "WIDEHOUSE_CLICKHOUSE_PASSWORD": "p@ss", "WIDEHOUSE_CLICKHOUSE_PORT": "18123"}
    s = load_settings(env)
    scope = {
        "WIDEHOUSE_CLICKHOUSE_USER": s.local.clickhouse_user,
        "WIDEHOUSE_CLICKHOUSE_PASSWORD": s.local.clickhouse_password,
        "WIDEHOUSE_CLICKHOUSE_PORT": s.local.clickhouse_port,
        "WIDEHOUSE_CLICKHOUSE_DATABASE": s.clickhouse.database,
    }
    assert set(LOCAL_SERVER_CLICKHOUSE_DSN.uses) == set(scope)
    dsn = LOCAL_SERVER_CLICKHOUSE_DSN.compute(scope)
    assert dsn == f"{s.local.clickhouse_url}/wh" == "http://widehouse:p%40ss@127.0.0.1:18123/wh"
    assert load_settings({**env, "WIDEHOUSE_CLICKHOUSE_DSN": dsn}).clickhouse.display_dsn == (
        "http://widehouse:***@127.0.0.1:18123/wh"
    )
    assert CLICKHOUSE_DSN_DEFAULT is LOCAL_SERVER_CLICKHOUSE_DSN
    assert s.clickhouse.dsn == dsn


# -- validation ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("WIDEHOUSE_PULSAR_BROKER_PORT", "70000", "between 1 and 65535"),
        ("WIDEHOUSE_PULSAR_BROKER_PORT", "abc", "is invalid: is not an integer"),
        ("WIDEHOUSE_CLICKHOUSE_PORT", "99999", "between 1 and 65535"),
        ("WIDEHOUSE_PULSAR_SERVICE_URL", "http://x:6650", "scheme must be one of pulsar, pulsar+ssl"),
        ("WIDEHOUSE_PULSAR_SERVICE_URL", "pulsar://:6650", "missing host"),
        ("WIDEHOUSE_PULSAR_SERVICE_URL", "pulsar://h:bad", "port must be a number between 1 and 65535"),
        ("WIDEHOUSE_PULSAR_SERVICE_URL", "pulsar://h:99999", "port must be a number between 1 and 65535"),
        ("WIDEHOUSE_PULSAR_SERVICE_URL", "pulsar://a:6650,:6651", "missing host"),
        ("WIDEHOUSE_PULSAR_ADMIN_URL", "http://", "missing host"),
        ("WIDEHOUSE_PULSAR_ADMIN_URL", "http://h:0", "port must be a number"),
        ("WIDEHOUSE_PULSAR_ADMIN_URL", "http://h:8080?x=1", "no query"),
        ("WIDEHOUSE_PULSAR_ADMIN_URL", "http://h :8080", "whitespace"),
        ("WIDEHOUSE_PULSAR_ADMIN_URL", "http://[::1", "not a valid URL"),
        ("WIDEHOUSE_CLICKHOUSE_DATABASE", "wh; DROP TABLE x", "plain identifier"),
        ("WIDEHOUSE_CLICKHOUSE_CLUSTER", "prod' SYNC", "letters, digits, '_', '.' or '-'"),
        ("WIDEHOUSE_CLICKHOUSE_CLUSTER", "9nodes", "starting with a letter or '_'"),
        ("WIDEHOUSE_CLICKHOUSE_COMPRESSION", "gzip", "expected one of auto, none, lz4, zstd"),
        ("WIDEHOUSE_CLICKHOUSE_USER", "1st", "starting with a letter"),
        ("WIDEHOUSE_CLICKHOUSE_HANDLES", "0", "positive integer"),
        ("WIDEHOUSE_HIVE_METASTORE_URI", "http://ms:9083", "scheme must be one of thrift"),
        ("WIDEHOUSE_HIVE_METASTORE_URI", "embeded", "scheme must be one of thrift (or `embedded`"),
        ("WIDEHOUSE_HIVE_METASTORE_PORT", "0", "between 1 and 65535"),
        ("WIDEHOUSE_HIVE_METASTORE_HEAP", "lots", "JVM size"),
        ("WIDEHOUSE_HBASE_HOST", "bad host", "host name or IP address"),
        ("WIDEHOUSE_HBASE_SALT_BUCKETS", "0", "between 1 and 1000"),
        ("WIDEHOUSE_HBASE_SALT_BUCKETS", "1001", "between 1 and 1000"),
        ("WIDEHOUSE_HBASE_TABLE_PREFIX", "wh day", "optionally after a namespace"),
        ("WIDEHOUSE_HBASE_ZOOKEEPER", "zk1", "host:port"),
        ("WIDEHOUSE_HBASE_ZOOKEEPER", "zk1:0", "port must be a number"),
        ("WIDEHOUSE_SPARK_SHUFFLE_PARTITIONS", "0", "positive integer"),
        ("WIDEHOUSE_SPARK_UI", "maybe", "expected true or false"),
        ("WIDEHOUSE_SPARK_CONF", "spark.a=1;oops", "'oops' is not a key=value pair"),
        ("WIDEHOUSE_SPARK_CONF", "bad name=1", "is not a key=value pair"),
        ("WIDEHOUSE_SPARK_MASTER", "bogus://x", "expected local"),
        ("WIDEHOUSE_SPARK_MASTER", "local[0]", "expected local"),
        ("WIDEHOUSE_SPARK_MASTER", "local[*]x", "expected local"),
        ("WIDEHOUSE_SPARK_MASTER", "spark://m", "spark://host:port"),
        ("WIDEHOUSE_SPARK_MASTER", "spark://m:bad", "port must be a number"),
        ("WIDEHOUSE_SPARK_MASTER", "k8s://", "missing host"),
        ("WIDEHOUSE_SPARK_MASTER", "mesos://", "missing host"),
        ("WIDEHOUSE_PULSAR_HEAP", "lots", "JVM size"),
        ("WIDEHOUSE_PULSAR_HEAP", "512mb", "JVM size"),
        ("WIDEHOUSE_PULSAR_JIT", "auto", "expected one of c1, late-c2, tiered"),
        ("WIDEHOUSE_SERVICE_START_TIMEOUT", "-1", "positive number"),
        ("WIDEHOUSE_SERVICE_START_TIMEOUT", "nan", "finite"),
        ("WIDEHOUSE_STREAM_TRIGGER_SECONDS", "inf", "finite"),
        ("WIDEHOUSE_STREAM_TRIGGER_SECONDS", "NaN", "finite"),
        ("WIDEHOUSE_STREAM_STOP_GRACE_SECONDS", "-inf", "finite"),
        ("WIDEHOUSE_STREAM_RESTART_BACKOFF_SECONDS", "0", "positive number"),
        ("WIDEHOUSE_STREAM_RESTART_BACKOFF_MAX_SECONDS", "nan", "finite"),
        ("WIDEHOUSE_PLAN_MESSAGE_COST", "inf", "is not a number of bytes"),
        ("WIDEHOUSE_PLAN_SLOT_CAPACITY", "nan", "is not a rate"),
        ("WIDEHOUSE_PLAN_TARGET_FILL", "nan", "finite"),
        ("WIDEHOUSE_DELTA_BRONZE_RETENTION_SECONDS", "0", "positive integer"),
        ("WIDEHOUSE_DELTA_BRONZE_UPKEEP_SECONDS", "-1", ">= 0"),
        ("WIDEHOUSE_DELTA_BRONZE_COMPACT_FILES", "1", ">= 2"),
        ("WIDEHOUSE_DELTA_ROOT", "relative/delta", "absolute path or a URI"),
        ("WIDEHOUSE_DELTA_ROOT", "file:relative", "absolute path or a URI"),
        ("WIDEHOUSE_DELTA_ROOT", "s3a://", "absolute path or a URI"),
        ("WIDEHOUSE_DELTA_ROOT", "/lake/a`; DROP TABLE x; --", "backquote"),
        ("WIDEHOUSE_DELTA_ROOT", "/lake/a\nb", "control characters"),
        ("WIDEHOUSE_DELTA_ROOT", "/lake/a\x00b", "control characters"),
        ("WIDEHOUSE_STREAM_CHECKPOINT_ROOT", "checkpoints", "absolute path or a URI"),
        ("WIDEHOUSE_HIVE_WAREHOUSE", "/w`h", "backquote"),
        ("WIDEHOUSE_STREAM_APP", "Widehouse", "lowercase"),
        ("WIDEHOUSE_STREAM_SINKS", "clickhouse,kafka", "comma list"),
        ("WIDEHOUSE_STREAM_DEAD_LETTER", "sometimes", "expected true or false"),
        ("WIDEHOUSE_STREAM_CONTROL_TOPIC", "widehouse/control/watermarks", "persistent://"),
        ("WIDEHOUSE_STREAM_CONTROL_TOPIC", "persistent://a/b", "persistent://"),
        ("WIDEHOUSE_TENANT_SUFFIX", "-x", "lowercase"),
        ("WIDEHOUSE_SUPERVISOR_MODE", "yarn", "expected one of local, cluster"),
        ("WIDEHOUSE_SUPERVISOR_MAX_FAILURES", "0", "positive integer"),
        ("WIDEHOUSE_SUPERVISOR_STALE_SECONDS", "0", "positive number"),
        ("WIDEHOUSE_AIRFLOW_PORT", "0", "between 1 and 65535"),
        ("WIDEHOUSE_AIRFLOW_DAGS_DIR", "/etc/hostname", "not a directory"),
        ("WIDEHOUSE_AIRFLOW_START", "2026-11-22T09:30Z", "start of an hour"),
        ("WIDEHOUSE_AIRFLOW_START", "yesterday", "UTC hour such as"),
    ],
)
def test_bad_values_name_the_variable(tmp_path: Path, name: str, value: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings({"WIDEHOUSE_STATE_DIR": str(tmp_path), name: value})
    message = str(info.value)
    assert name in message
    assert repr(value.strip()) in message
    assert expected in message


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("WIDEHOUSE_SPARK_MASTER", "local"),
        ("WIDEHOUSE_SPARK_MASTER", "local[4]"),
        ("WIDEHOUSE_SPARK_MASTER", "local[4,2]"),
        ("WIDEHOUSE_SPARK_MASTER", "local[*, 3]"),
        ("WIDEHOUSE_SPARK_MASTER", "yarn"),
        ("WIDEHOUSE_SPARK_MASTER", "spark://m1:7077,m2:7077"),
        ("WIDEHOUSE_SPARK_MASTER", "k8s://https://k8s.example:6443"),
        ("WIDEHOUSE_SPARK_MASTER", "k8s://k8s.example:443"),
        ("WIDEHOUSE_SPARK_MASTER", "mesos://m:5050"),
        ("WIDEHOUSE_SPARK_MASTER", "mesos://zk://z1:2181,z2:2181/mesos"),
        ("WIDEHOUSE_CLICKHOUSE_DSN", "chdb:///var/lib/ch"),
        ("WIDEHOUSE_CLICKHOUSE_DSN", "chdb://memory"),
        ("WIDEHOUSE_CLICKHOUSE_DSN", "chdb://:memory:"),
        ("WIDEHOUSE_CLICKHOUSE_DSN", "chdb://memory/wh"),
        ("WIDEHOUSE_CLICKHOUSE_DSN", "https://u:p@ch.example:8443/db?secure=true"),
        ("WIDEHOUSE_CLICKHOUSE_DSN", "http://[::1]:8123"),
        ("WIDEHOUSE_DELTA_ROOT", "/data/delta"),
        ("WIDEHOUSE_DELTA_ROOT", "file:/data/delta"),
        ("WIDEHOUSE_DELTA_ROOT", "file:///data/delta"),
        ("WIDEHOUSE_DELTA_ROOT", "abfss://c@acct.dfs.core.windows.net/delta"),
        ("WIDEHOUSE_DELTA_ROOT", "hdfs:///delta"),
        ("WIDEHOUSE_DELTA_ROOT", "gs://bucket/delta"),
        ("WIDEHOUSE_PULSAR_SERVICE_URL", "pulsar://b1:6650,b2:6650"),
        ("WIDEHOUSE_PULSAR_ADMIN_URL", "http://[::1]:8090"),
        ("WIDEHOUSE_HBASE_HOST", "10.0.0.7"),
        ("WIDEHOUSE_HBASE_TABLE_PREFIX", "ns:wh_"),
        ("WIDEHOUSE_HBASE_ZOOKEEPER", "10.0.0.7:2181,[::1]:2181"),
    ],
)
def test_good_values_are_kept(name: str, value: str) -> None:
    assert leaves(load_settings({**BASE, name: value}))[BY_NAME[name].target] == value


def test_state_dir_that_is_a_file_is_rejected(tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(ConfigError, match=r"WIDEHOUSE_STATE_DIR=.*not a directory"):
        load_settings({"WIDEHOUSE_STATE_DIR": str(a_file)})


def test_a_default_that_cannot_work_names_the_variable_to_set() -> None:
    with pytest.raises(ConfigError) as info:
        load_settings({**BASE, "WIDEHOUSE_STATE_DIR": "/srv/a`b"})
    assert str(info.value).startswith(
        "WIDEHOUSE_DELTA_ROOT is not set and its default (<state>/delta) is invalid: must not contain a "
        "backquote"
    )


@pytest.mark.parametrize(
    "name",
    [
        "WIDEHOUSE_PULSAR_WEB_PORT",
        "WIDEHOUSE_HBASE_ZK_PORT",
        "WIDEHOUSE_CLICKHOUSE_PORT",
        "WIDEHOUSE_HBASE_THRIFT_INFO_PORT",
        "WIDEHOUSE_AIRFLOW_PORT",
        "WIDEHOUSE_AIRFLOW_WORKER_LOG_PORT",
    ],
)
def test_two_services_on_one_port_is_a_config_error(name: str) -> None:
    with pytest.raises(
        ConfigError, match=f"WIDEHOUSE_HBASE_THRIFT_PORT and {name}|{name} and WIDEHOUSE_HBASE"
    ):
        load_settings({**BASE, name: "9090"})


def test_planner_cross_field_check_names_the_variables() -> None:
    with pytest.raises(
        ConfigError, match=r"^WIDEHOUSE_PLAN_\* settings: .*isolation=0\.9 must be <= target_fill=0\.8"
    ):
        load_settings({**BASE, "WIDEHOUSE_PLAN_ISOLATION": "0.9"})


def test_stream_restart_backoff_cross_check_names_the_variables() -> None:
    with pytest.raises(
        ConfigError,
        match=r"WIDEHOUSE_STREAM_RESTART_BACKOFF_SECONDS=30\.0 must be <= "
        r"WIDEHOUSE_STREAM_RESTART_BACKOFF_MAX_SECONDS=10\.0",
    ):
        load_settings(
            {
                **BASE,
                "WIDEHOUSE_STREAM_RESTART_BACKOFF_SECONDS": "30",
                "WIDEHOUSE_STREAM_RESTART_BACKOFF_MAX_SECONDS": "10",
            }
        )


# -- secrets ------------------------------------------------------------------------------------


def test_mask_url() -> None:
    assert mask_url("http://u:p@h:1/db") == "http://u:***@h:1/db"
    assert mask_url("http://h:1/db") == "http://h:1/db"
    assert mask_url("http://u@h:1/db") == "http://u@h:1/db"
    assert mask_url("http://u:p@ss@h/db") == "http://u:***@h/db"
    assert mask_url("http://h/db?user=u&password=p&PWD=x;Token=t&api_key=k&x=1#f") == (
        "http://h/db?user=u&password=***&PWD=***;Token=***&api_key=***&x=1#f"
    )
    assert mask_url("http://h/db?pass=p&client_secret=s&secure=1") == (
        "http://h/db?pass=***&client_secret=***&secure=1"
    )
    assert mask_url("k8s://https://admin:pw@k8s:6443") == "k8s://https://admin:***@k8s:6443"
    assert mask_url("http://u:pw@[bad") == "http://u:***@[bad"
    assert mask_url("GET http://u:pw@h/x failed") == "GET http://u:***@h/x failed"
    assert mask_url("512m") == "512m"


SECRET = "hunter2"


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("WIDEHOUSE_CLICKHOUSE_DSN", f"http://u:{SECRET}@h:99999/db", "port must be a number"),
        ("WIDEHOUSE_CLICKHOUSE_DSN", f"http://u:{SECRET}@h:bad/db", "port must be a number"),
        ("WIDEHOUSE_CLICKHOUSE_DSN", f"mysql://u:{SECRET}@h/db", "scheme must be chdb, http or https"),
        ("WIDEHOUSE_CLICKHOUSE_DSN", f"http://u:{SECRET}@h/a-b", "plain identifier"),
        ("WIDEHOUSE_CLICKHOUSE_DSN", f"http://u:{SECRET} @h/db", "whitespace"),
        ("WIDEHOUSE_CLICKHOUSE_DSN", f"chdb:relative/{SECRET}", "absolute path"),
        ("WIDEHOUSE_CLICKHOUSE_DSN", f"chdb://relative/{SECRET}", "chdb:///absolute/path"),
        ("WIDEHOUSE_PULSAR_AUTH_TOKEN", f"{SECRET} {SECRET}", "whitespace"),
        ("WIDEHOUSE_CLICKHOUSE_PASSWORD", f"{SECRET}\x01", "control characters"),
    ],
)
def test_errors_about_secrets_never_show_the_value(name: str, value: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings({**BASE, name: value})
    rendered = "".join(traceback.format_exception(info.value))
    assert f"{name} is invalid: " in rendered and expected in rendered
    assert SECRET not in rendered


def test_errors_about_urls_mask_their_credentials() -> None:
    value = f"http://admin:{SECRET}@h:bad?token={SECRET}"
    with pytest.raises(ConfigError) as info:
        load_settings({**BASE, "WIDEHOUSE_PULSAR_ADMIN_URL": value})
    assert "WIDEHOUSE_PULSAR_ADMIN_URL='http://admin:***@h:bad?token=***' is invalid" in str(info.value)
    assert SECRET not in "".join(traceback.format_exception(info.value))
    with pytest.raises(ConfigError) as info:
        load_settings({**BASE, "WIDEHOUSE_SPARK_CONF": f"spark.hadoop.fs.s3a.secret.key={SECRET};oops"})
    assert SECRET not in str(info.value) and "secret.key=***" in str(info.value)


def test_secrets_stay_out_of_repr_and_describe() -> None:
    s = load_settings(
        {
            **BASE,
            "WIDEHOUSE_PULSAR_AUTH_TOKEN": SECRET,
            "WIDEHOUSE_PULSAR_SERVICE_URL": f"pulsar+ssl://u:{SECRET}@pulsar.prod:6651",
            "WIDEHOUSE_PULSAR_ADMIN_URL": f"https://admin:{SECRET}@pulsar.prod:8443",
            "WIDEHOUSE_CLICKHOUSE_DSN": f"https://ch.prod:8443/db?user=u&Password={SECRET}",
            "WIDEHOUSE_CLICKHOUSE_PASSWORD": SECRET,
            "WIDEHOUSE_HIVE_METASTORE_URI": f"thrift://u:{SECRET}@ms:9083",
            "WIDEHOUSE_SPARK_MASTER": f"k8s://https://u:{SECRET}@k8s:6443",
            "WIDEHOUSE_SPARK_CONF": f"spark.hadoop.fs.s3a.secret.key={SECRET};spark.x=1",
        }
    )
    assert SECRET not in repr(s)
    shown = dict(describe(s))
    assert SECRET not in repr(shown)
    assert shown["pulsar service url"] == "pulsar+ssl://u:***@pulsar.prod:6651"
    assert shown["pulsar admin url"] == "https://admin:***@pulsar.prod:8443"
    assert shown["clickhouse dsn"] == "https://ch.prod:8443/db?user=u&Password=***"
    assert shown["pulsar auth token"] == "***"
    assert s.spark.display_conf == (("spark.hadoop.fs.s3a.secret.key", "***"), ("spark.x", "1"))
    # the values themselves stay usable
    assert s.pulsar.auth_token == SECRET and SECRET in s.clickhouse.dsn


def test_config_objects_built_by_hand_mask_too(tmp_path: Path) -> None:
    objects = [
        PulsarSettings(f"pulsar://u:{SECRET}@h:6650", f"http://u:{SECRET}@h:8090", SECRET),
        ClickHouseSettings(dsn=f"http://u:{SECRET}@h:8123/db"),
        SparkSettings(jars=(), local_dir=None, extra_conf=(("spark.auth.secret", SECRET),)),
        LocalServicesSettings(state_dir=tmp_path, vendor_dir=tmp_path, clickhouse_password=SECRET),
        StreamSettings(checkpoint_root="/c"),
    ]
    assert all(SECRET not in repr(o) for o in objects)


def test_pulsar_admin_errors_mask_the_url() -> None:
    from widehouse.pulsar.admin import PulsarAdmin

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    settings = PulsarSettings("pulsar://127.0.0.1:1", f"http://admin:{SECRET}@127.0.0.1:{port}")
    with PulsarAdmin(settings, timeout=2) as admin, pytest.raises(PulsarError) as info:
        admin.clusters()
    assert f"GET http://admin:***@127.0.0.1:{port}/admin/v2/clusters failed" in str(info.value)
    assert SECRET not in "".join(traceback.format_exception(info.value))


# -- Airflow and the streams supervisor ---------------------------------------------------------


def test_airflow_defaults_keep_off_the_other_services(tmp_path: Path) -> None:
    s = load_settings({**BASE, "WIDEHOUSE_STATE_DIR": str(tmp_path)})
    assert s.airflow.home == tmp_path / "airflow"
    assert s.airflow.url == "http://127.0.0.1:8080"
    assert (s.airflow.worker_log_port, s.airflow.triggerer_log_port) == (8793, 8794)
    assert s.local.pulsar_web_port != s.airflow.port
    assert s.airflow.connections_file is not None
    assert s.airflow.connections_file.name == "dev-connections.json"
    assert "widehouse-local" not in repr(s.airflow)


def test_an_empty_connections_file_setting_means_none() -> None:
    assert load_settings({**BASE, "WIDEHOUSE_AIRFLOW_CONNECTIONS_FILE": ""}).airflow.connections_file is None


def test_stream_publishing_defaults_and_the_empty_control_topic() -> None:
    stream = load_settings(BASE).stream
    assert stream.dead_letter is False
    assert stream.control_topic == "persistent://widehouse/control/watermarks"
    for off in ("", "none", "NONE"):
        assert load_settings({**BASE, "WIDEHOUSE_STREAM_CONTROL_TOPIC": off}).stream.control_topic is None


def test_an_airflow_port_taken_by_a_local_service_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="WIDEHOUSE_PULSAR_WEB_PORT and WIDEHOUSE_AIRFLOW_PORT are both"):
        load_settings({**BASE, "WIDEHOUSE_AIRFLOW_PORT": "8090"})


def test_the_local_secured_pulsar_token_is_the_default_only_with_token_auth(tmp_path: Path) -> None:
    state = {"WIDEHOUSE_STATE_DIR": str(tmp_path)}
    assert (
        load_settings({**state, "WIDEHOUSE_PULSAR_AUTH": "token"}).pulsar.auth_token is None
    )  # not made yet
    secrets_dir = tmp_path / "secrets"
    secrets_dir.mkdir(mode=0o700)
    (secrets_dir / "pulsar-admin-token").write_text("made.by.up\n")
    assert load_settings({**state, "WIDEHOUSE_PULSAR_AUTH": "token"}).pulsar.auth_token == "made.by.up"
    assert load_settings(state).pulsar.auth_token is None  # auth off: no token sent
    explicit = {**state, "WIDEHOUSE_PULSAR_AUTH": "token", "WIDEHOUSE_PULSAR_AUTH_TOKEN": "mine.x.y"}
    assert load_settings(explicit).pulsar.auth_token == "mine.x.y"
    with pytest.raises(
        ConfigError, match="WIDEHOUSE_PULSAR_AUTH='tls' is invalid: expected one of none, token"
    ):
        load_settings({**state, "WIDEHOUSE_PULSAR_AUTH": "tls"})

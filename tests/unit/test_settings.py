from __future__ import annotations

from pathlib import Path

import pytest

from widehouse.errors import ConfigError
from widehouse.settings import VARIABLES, load_settings, mask_url


def test_defaults_describe_local_mode(tmp_path: Path) -> None:
    s = load_settings({"WIDEHOUSE_STATE_DIR": str(tmp_path)})
    assert s.state_dir == tmp_path
    assert s.pulsar.service_url == "pulsar://127.0.0.1:6650"
    assert s.pulsar.admin_url == "http://127.0.0.1:8090"
    assert s.pulsar.auth_token is None
    assert s.clickhouse.dsn == f"chdb://{tmp_path}/clickhouse"
    assert s.clickhouse.embedded
    assert s.clickhouse.database == "wh"
    assert s.delta.root == str(tmp_path / "delta")
    assert (s.hbase.host, s.hbase.port) == ("127.0.0.1", 9090)
    assert s.hive.metastore_uri is None
    assert s.hive.metastore_db_dir == str(tmp_path / "hive" / "metastore_db")
    assert s.spark.master == "local[*]" and s.spark.is_local
    assert s.spark.shuffle_partitions == 4
    assert s.spark.ui_enabled is False


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


def test_secrets_stay_out_of_repr(tmp_path: Path) -> None:
    s = load_settings(
        {
            "WIDEHOUSE_STATE_DIR": str(tmp_path),
            "WIDEHOUSE_PULSAR_AUTH_TOKEN": "very-secret-token",
            "WIDEHOUSE_CLICKHOUSE_DSN": "http://u:very-secret-pw@h:8123",
        }
    )
    assert "very-secret" not in repr(s)


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("WIDEHOUSE_PULSAR_BROKER_PORT", "70000", "between 1 and 65535"),
        ("WIDEHOUSE_PULSAR_BROKER_PORT", "abc", "invalid literal"),
        ("WIDEHOUSE_PULSAR_SERVICE_URL", "http://x:6650", "scheme must be one of pulsar, pulsar+ssl"),
        ("WIDEHOUSE_PULSAR_ADMIN_URL", "http://", "missing host"),
        ("WIDEHOUSE_CLICKHOUSE_DSN", "mysql://h/db", "scheme must be chdb, http or https"),
        ("WIDEHOUSE_CLICKHOUSE_DSN", "chdb://", "needs a location"),
        ("WIDEHOUSE_CLICKHOUSE_DATABASE", "wh; DROP TABLE x", "plain identifier"),
        ("WIDEHOUSE_HIVE_METASTORE_URI", "http://ms:9083", "scheme must be one of thrift"),
        ("WIDEHOUSE_SPARK_SHUFFLE_PARTITIONS", "0", "positive integer"),
        ("WIDEHOUSE_SPARK_UI", "maybe", "expected true or false"),
        ("WIDEHOUSE_SPARK_CONF", "spark.a=1;oops", "'oops' is not a key=value pair"),
        ("WIDEHOUSE_PULSAR_HEAP", "lots", "JVM size"),
        ("WIDEHOUSE_SERVICE_START_TIMEOUT", "-1", "positive number"),
    ],
)
def test_bad_values_name_the_variable(tmp_path: Path, name: str, value: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings({"WIDEHOUSE_STATE_DIR": str(tmp_path), name: value})
    message = str(info.value)
    assert name in message
    assert repr(value) in message
    assert expected in message


def test_state_dir_that_is_a_file_is_rejected(tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(ConfigError, match=r"WIDEHOUSE_STATE_DIR=.*not a directory"):
        load_settings({"WIDEHOUSE_STATE_DIR": str(a_file)})


def test_two_services_on_one_port_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="WIDEHOUSE_PULSAR_BROKER_PORT and WIDEHOUSE_HBASE_THRIFT_PORT"):
        load_settings(
            {
                "WIDEHOUSE_STATE_DIR": str(tmp_path),
                "WIDEHOUSE_PULSAR_BROKER_PORT": "9090",
            }
        )


def test_blank_values_mean_default(tmp_path: Path) -> None:
    s = load_settings({"WIDEHOUSE_STATE_DIR": str(tmp_path), "WIDEHOUSE_SPARK_MASTER": "  "})
    assert s.spark.master == "local[*]"


def test_settings_are_frozen(tmp_path: Path) -> None:
    s = load_settings({"WIDEHOUSE_STATE_DIR": str(tmp_path)})
    with pytest.raises(AttributeError):
        s.spark.master = "yarn"  # type: ignore[misc]


def test_every_variable_is_read_by_the_loader() -> None:
    """A variable documented in VARIABLES but never read would be a lie in the README."""
    source = (Path(__file__).parents[2] / "spark/widehouse/settings.py").read_text()
    loader = source[source.index("def load_settings") :]
    unread = [v.name for v in VARIABLES if f'"{v.name}"' not in loader]
    assert unread == []


def test_mask_url() -> None:
    assert mask_url("http://u:p@h:1/db") == "http://u:***@h:1/db"
    assert mask_url("http://h:1/db") == "http://h:1/db"

"""The `widehouse` command, run as a user would (a subprocess)."""

from __future__ import annotations

from pathlib import Path

from tests.support import run_cli
from widehouse import __version__


def test_version() -> None:
    out = run_cli("--version")
    assert out.returncode == 0
    assert out.stdout.strip() == f"widehouse {__version__}"


def test_config_shows_effective_settings_with_secrets_masked(tmp_path: Path) -> None:
    out = run_cli(
        "config",
        env={
            "WIDEHOUSE_STATE_DIR": str(tmp_path),
            "WIDEHOUSE_CLICKHOUSE_DSN": "http://wh:hunter2@ch:8123/db",
            "WIDEHOUSE_PULSAR_AUTH_TOKEN": "tok-123",
        },
    )
    assert out.returncode == 0, out.stderr
    assert "http://wh:***@ch:8123/db" in out.stdout
    assert "hunter2" not in out.stdout and "tok-123" not in out.stdout
    assert str(tmp_path) in out.stdout


def test_config_variables_lists_every_variable() -> None:
    out = run_cli("config", "--variables")
    assert out.returncode == 0
    assert "WIDEHOUSE_CLICKHOUSE_DSN" in out.stdout
    assert "WIDEHOUSE_HBASE_THRIFT_PORT" in out.stdout


def test_bad_setting_is_a_one_line_error_naming_the_variable(tmp_path: Path) -> None:
    out = run_cli("config", env={"WIDEHOUSE_STATE_DIR": str(tmp_path), "WIDEHOUSE_PULSAR_WEB_PORT": "http"})
    assert out.returncode == 2
    assert "WIDEHOUSE_PULSAR_WEB_PORT='http' is invalid" in out.stderr
    assert "Traceback" not in out.stderr


def test_status_of_stopped_services_exits_3(tmp_path: Path) -> None:
    out = run_cli("services", "status", env={"WIDEHOUSE_STATE_DIR": str(tmp_path)})
    assert out.returncode == 3
    states = {line.split()[0]: line.split()[1] for line in out.stdout.splitlines()[2:]}
    assert states == {
        "pulsar": "stopped",
        "hbase": "stopped",
        "hbase-thrift": "stopped",
        "clickhouse": "stopped",
        "metastore": "stopped",
    }


def test_up_without_setup_explains_what_to_run(tmp_path: Path) -> None:
    out = run_cli(
        "services",
        "up",
        "pulsar",
        env={"WIDEHOUSE_STATE_DIR": str(tmp_path), "WIDEHOUSE_VENDOR_DIR": str(tmp_path / "empty")},
    )
    assert out.returncode == 1
    assert "run `make setup`" in out.stderr


def test_unknown_service_is_a_usage_error(tmp_path: Path) -> None:
    out = run_cli("services", "up", "kafka", env={"WIDEHOUSE_STATE_DIR": str(tmp_path)})
    assert out.returncode == 2
    assert "unknown service kafka" in out.stderr

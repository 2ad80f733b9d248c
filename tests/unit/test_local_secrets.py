"""Local passwords generated per state dir, private state dirs, and where the passwords go."""

from __future__ import annotations

import json
import multiprocessing
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tests.support import without_settings
from widehouse.orchestration.connections import ConnectionFields, overlay_from
from widehouse.private import (
    AIRFLOW_PASSWORD,
    CLICKHOUSE_PASSWORD,
    ensure_secret,
    others_could_change,
    private_dir,
)
from widehouse.services.airflow import render_connections, write_passwords_file
from widehouse.settings import create_local_secrets, load_settings

ROOT = Path(__file__).parents[2]
OLD_CONSTANT = "widehouse-local"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def env_for(state: Path, **extra: str) -> dict[str, str]:
    """A clean environment (no password variables from the test session) on ``state``."""
    return {"WIDEHOUSE_STATE_DIR": str(state), **extra}


def test_generated_once_then_reused_with_private_modes(tmp_path: Path) -> None:
    state = tmp_path / "state"
    env = env_for(state)
    assert load_settings(env).local.clickhouse_password is None  # nothing generated yet
    assert not state.exists()  # loading settings wrote nothing

    created = create_local_secrets((CLICKHOUSE_PASSWORD,), env)
    path = state / "secrets" / "clickhouse-password"
    assert [(c.variable, c.path) for c in created] == [("WIDEHOUSE_CLICKHOUSE_PASSWORD", path)]
    on_disk = path.read_text().strip()
    assert created[0].value == on_disk and len(on_disk) >= 32 and on_disk != OLD_CONSTANT
    assert mode(path) == 0o600
    assert mode(state / "secrets") == 0o700
    assert mode(state) == 0o700  # created by the generation: private from the start

    first, second = load_settings(env), load_settings(env)
    assert first.local.clickhouse_password == second.local.clickhouse_password == on_disk
    assert first.clickhouse.dsn == f"http://widehouse:{quote(on_disk, safe='')}@127.0.0.1:8123/wh"
    assert create_local_secrets((CLICKHOUSE_PASSWORD,), env) == []  # the second `up`: nothing new
    assert path.read_text().strip() == on_disk
    assert load_settings(env).airflow.password is None  # only what was asked for


def test_each_secret_is_its_own(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    created = create_local_secrets((AIRFLOW_PASSWORD, CLICKHOUSE_PASSWORD), env)
    assert [c.variable for c in created] == ["WIDEHOUSE_AIRFLOW_PASSWORD", "WIDEHOUSE_CLICKHOUSE_PASSWORD"]
    settings = load_settings(env)
    assert settings.airflow.password == (tmp_path / "secrets" / "airflow-password").read_text().strip()
    assert settings.airflow.password != settings.local.clickhouse_password


def test_an_explicit_variable_or_dsn_wins(tmp_path: Path) -> None:
    mine = env_for(tmp_path, WIDEHOUSE_CLICKHOUSE_PASSWORD="my own", WIDEHOUSE_AIRFLOW_PASSWORD="af own")
    assert create_local_secrets((CLICKHOUSE_PASSWORD, AIRFLOW_PASSWORD), mine) == []
    assert not (tmp_path / "secrets").exists()  # nothing generated for a password that is set

    create_local_secrets((CLICKHOUSE_PASSWORD, AIRFLOW_PASSWORD), env_for(tmp_path))  # files exist now
    settings = load_settings(mine)
    assert (settings.local.clickhouse_password, settings.airflow.password) == ("my own", "af own")
    assert settings.clickhouse.dsn == "http://widehouse:my%20own@127.0.0.1:8123/wh"
    dsn = "https://analyst:pw@ch.prod:8443/db"
    assert load_settings(env_for(tmp_path, WIDEHOUSE_CLICKHOUSE_DSN=dsn)).clickhouse.dsn == dsn


def _generate(state: str, barrier: Any, out: Any) -> None:
    barrier.wait()
    out.put(ensure_secret(Path(state), CLICKHOUSE_PASSWORD))


def test_processes_generating_at_once_agree(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    for attempt in range(5):
        state = tmp_path / f"state{attempt}"
        barrier, out = context.Barrier(4), context.Queue()
        workers = [context.Process(target=_generate, args=(str(state), barrier, out)) for _ in range(4)]
        for worker in workers:
            worker.start()
        results = [out.get(timeout=60) for _ in workers]
        for worker in workers:
            worker.join(timeout=60)
        on_disk = (state / "secrets" / "clickhouse-password").read_text().strip()
        assert {value for value, _ in results} == {on_disk}
        assert sorted(created for _, created in results) == [False, False, False, True]
        assert [p.name for p in (state / "secrets").iterdir()] == ["clickhouse-password"]  # no temp left


def test_private_dir_creates_0700_and_tightens_only_when_asked(tmp_path: Path) -> None:
    made = private_dir(tmp_path / "a" / "b")
    assert (mode(tmp_path / "a"), mode(made)) == (0o700, 0o700)
    opened = tmp_path / "opened"
    opened.mkdir(mode=0o755)
    opened.chmod(0o755)
    private_dir(opened)
    assert mode(opened) == 0o755  # a directory the user chose keeps its mode
    private_dir(opened, tighten=True)
    assert mode(opened) == 0o700  # what `up` does to the state dir and the services' dirs


def test_others_could_change_names_who_could(tmp_path: Path) -> None:
    kept = private_dir(tmp_path / "kept") / "command.json"
    kept.write_text("{}")
    kept.chmod(0o644)
    assert others_could_change(kept) is None
    kept.chmod(0o620)
    assert others_could_change(kept) == f"{kept} is writable by its group or others (mode 620)"
    kept.chmod(0o600)
    (tmp_path / "kept").chmod(0o777)
    assert others_could_change(kept) == f"{tmp_path / 'kept'} is writable by its group or others (mode 777)"
    (tmp_path / "kept").chmod(0o1777)  # sticky, like /tmp
    assert others_could_change(kept) is None
    link = tmp_path / "link.json"
    link.symlink_to(kept)
    assert others_could_change(link) == f"{link} is a symbolic link"
    assert others_could_change(tmp_path / "missing").startswith(f"{tmp_path / 'missing'} cannot be read")


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown needs root")
def test_others_could_change_what_another_user_owns(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, 12345, 12345)
    assert others_could_change(theirs) == f"{theirs} belongs to uid 12345"
    mine = theirs / "mine"
    mine.mkdir(mode=0o700)
    assert others_could_change(mine) == f"{theirs} belongs to uid 12345"


def test_airflow_passwords_file_gets_the_generated_password(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    create_local_secrets((AIRFLOW_PASSWORD,), env)
    airflow = load_settings(env).airflow
    path = write_passwords_file(airflow)
    generated = (tmp_path / "secrets" / "airflow-password").read_text().strip()
    assert json.loads(path.read_text()) == {"admin": generated}
    assert mode(path) == 0o600


def test_the_rendered_dev_connections_reach_the_local_clickhouse_with_its_password(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    create_local_secrets((CLICKHOUSE_PASSWORD,), env)
    settings = load_settings(env)
    committed = ROOT / "docker" / "airflow" / "dev-connections.json"
    assert OLD_CONSTANT not in committed.read_text()
    body = json.loads(render_connections(committed, settings.local))
    generated = (tmp_path / "secrets" / "clickhouse-password").read_text().strip()
    assert body["widehouse_clickhouse"]["password"] == generated
    conns = {
        k: ConnectionFields(
            k, v.get("host"), v.get("port"), v.get("login"), v.get("password"), v.get("schema")
        )
        for k, v in body.items()
    }
    assert overlay_from(conns).env["WIDEHOUSE_CLICKHOUSE_DSN"] == settings.clickhouse.dsn

    other = tmp_path / "other.json"
    other.write_text(
        json.dumps({"widehouse_clickhouse": {"host": "ch.prod", "port": 8123, "login": "widehouse"}})
    )
    assert "password" not in json.loads(render_connections(other, settings.local))["widehouse_clickhouse"]


def run_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = without_settings()
    return subprocess.run(
        [sys.executable, "-m", "widehouse", *args],
        capture_output=True,
        text=True,
        env={**base, **env},
        timeout=120,
        check=False,
    )


def test_config_masks_the_generated_passwords_unless_asked(tmp_path: Path) -> None:
    env = env_for(tmp_path, WIDEHOUSE_PULSAR_AUTH_TOKEN="tok-123")
    before = run_cli("config", env=env)
    assert before.returncode == 0, before.stderr
    assert "(none yet: `widehouse services up` generates it)" in before.stdout
    assert not (tmp_path / "secrets").exists()  # `config` never generates

    create_local_secrets((CLICKHOUSE_PASSWORD, AIRFLOW_PASSWORD), env)
    clickhouse = (tmp_path / "secrets" / "clickhouse-password").read_text().strip()
    airflow = (tmp_path / "secrets" / "airflow-password").read_text().strip()
    masked = run_cli("config", env=env)
    assert masked.returncode == 0, masked.stderr
    assert clickhouse not in masked.stdout and airflow not in masked.stdout and "tok-123" not in masked.stdout
    assert "http://widehouse:***@127.0.0.1:8123/wh" in masked.stdout

    shown = run_cli("config", "--show-secrets", env=env)
    assert shown.returncode == 0, shown.stderr
    assert f"http://widehouse:{quote(clickhouse, safe='')}@127.0.0.1:8123/wh" in shown.stdout
    assert f"user widehouse, password {clickhouse}" in shown.stdout
    assert f"user admin, password {airflow}" in shown.stdout
    assert "tok-123" in shown.stdout


@pytest.mark.parametrize("args", [("config", "--variables"), ("services", "status")])
def test_commands_that_start_nothing_generate_nothing(tmp_path: Path, args: tuple[str, ...]) -> None:
    run_cli(*args, env=env_for(tmp_path))
    assert not (tmp_path / "secrets").exists()


def test_the_clickhouse_service_never_starts_without_a_password(tmp_path: Path) -> None:
    from widehouse.errors import ConfigError
    from widehouse.services.clickhouse import ClickHouseService

    service = ClickHouseService(load_settings(env_for(tmp_path)).local)  # nothing generated yet
    with pytest.raises(ConfigError, match="WIDEHOUSE_CLICKHOUSE_PASSWORD"):
        service.command()
    create_local_secrets((CLICKHOUSE_PASSWORD,), env_for(tmp_path))
    generated = (tmp_path / "secrets" / "clickhouse-password").read_text().strip()
    service = ClickHouseService(load_settings(env_for(tmp_path)).local)
    assert service.environment() == {"WIDEHOUSE_CLICKHOUSE_PASSWORD": generated}
    assert generated not in " ".join(service.command())  # never on the command line


def test_data_dirs_a_spark_session_creates_are_private(tmp_path: Path) -> None:
    from widehouse.spark.session import make_local_dirs

    state = tmp_path / "state"
    make_local_dirs(load_settings(env_for(state)))
    for directory in (
        state,
        state / "delta",
        state / "hive",
        state / "hive" / "warehouse",
        state / "spark" / "tmp",
    ):
        assert mode(directory) == 0o700, directory

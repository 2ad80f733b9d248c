"""Shared fixtures.

- ``settings``: Settings for this test session. State (chDB data, Delta tables, Hive metastore,
  checkpoints, and services started by the tests) lives in a fresh temporary state dir; service
  endpoints come from the environment / defaults, so tests can target other services by URL.
- ``services``: the real local services (Pulsar, HBase + Thrift, the ClickHouse service, the Hive
  metastore). Each is reused when it already answers on its configured port
  (e.g. a developer ran ``widehouse services up``) and then left running; otherwise started once
  for the session and stopped at its end. The local ClickHouse password is chosen once per session
  (:func:`session_clickhouse_password`) and exported, so both ways and every subprocess agree.
- ``metastore``: the Hive metastore service alone (what a Spark session needs). Unless the
  environment names a metastore, each test session runs its own on a free port over a fresh
  catalog (:func:`pytest_configure` exports the port, ``state_dir`` the warehouse), so tables of an
  earlier run never collide and every Spark process of the session, subprocesses included, shares
  one catalog and one warehouse dir.
- ``spark``: one local SparkSession (Delta + Hive) for the session, tuned small.

The session owns what it starts (:mod:`widehouse.services.ownership`): :func:`pytest_configure`
first stops what a dead test session left running (never the environment's own state dir's
services), then marks this session so every process it starts inherits the mark.
"""

from __future__ import annotations

import os
import secrets
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from widehouse.services import ServiceManager, ownership
from widehouse.settings import Settings, load_settings

SPARK_TEST_CONF = {
    "spark.master": "local[2]",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.ui.enabled": "false",
    "spark.driver.memory": "2g",
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.sql.streaming.stopTimeout": "30s",
}


def session_clickhouse_password() -> str:
    """The local ClickHouse password of this test session, in order of precedence:

    1. ``WIDEHOUSE_CLICKHOUSE_PASSWORD`` when set (a developer who chose one);
    2. the one ``widehouse services up`` generated in the environment's state dir (``<checkout>/.state``
       unless ``WIDEHOUSE_STATE_DIR`` says otherwise): the developer's running services use it;
    3. a new random one, for the services this session starts in its own fresh state dir (CI).
    """
    local = load_settings().local
    if local.clickhouse_password is not None:
        return local.clickhouse_password
    return secrets.token_urlsafe(24)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


_MARK = pytest.StashKey[ownership.Mark]()
"""This session's mark (released at its end)."""


def pytest_configure(config: pytest.Config) -> None:
    # what a dead session (SIGKILL, CI time-out) left would hold the ports this session needs
    reaped = ownership.reap(protected=[load_settings().local.state_dir])
    for leftover in reaped:
        _say(
            config,
            f"widehouse: stopped pid {leftover.pid} of dead test session {leftover.mark}: "
            f"{leftover.command[:160]}",
        )
    config.stash[_MARK] = ownership.claim()
    # one password for the whole session: settings loaded anywhere (tests build their own, and
    # subprocesses inherit os.environ with another state dir) reach the same ClickHouse service
    os.environ["WIDEHOUSE_CLICKHOUSE_PASSWORD"] = session_clickhouse_password()
    # a metastore of the session's own (fresh catalog), unless the environment names one
    named = ("WIDEHOUSE_HIVE_METASTORE_URI", "WIDEHOUSE_HIVE_METASTORE_PORT")
    if not any(os.environ.get(name) for name in named):
        os.environ["WIDEHOUSE_HIVE_METASTORE_PORT"] = str(free_port())


def pytest_unconfigure(config: pytest.Config) -> None:
    mark = config.stash.get(_MARK, None)
    if mark is not None:
        ownership.release(mark)


def _say(config: pytest.Config, line: str) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(line)
    else:
        print(line, file=sys.stderr)


def settings_for(state_dir: Path, **overrides: str) -> Settings:
    """Settings over the current environment with the state dir (and anything else) replaced.

    ``WIDEHOUSE_TEST_CLICKHOUSE_DSN`` points the ClickHouse tests at any ClickHouse server instead
    of the local service.
    """
    env = {**os.environ, "WIDEHOUSE_STATE_DIR": str(state_dir)}
    if os.environ.get("WIDEHOUSE_TEST_CLICKHOUSE_DSN"):
        env["WIDEHOUSE_CLICKHOUSE_DSN"] = os.environ["WIDEHOUSE_TEST_CLICKHOUSE_DSN"]
    return load_settings({**env, **overrides})


@pytest.fixture(scope="session")
def state_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("state")
    # one warehouse for every Spark process of the session (subprocesses with other state dirs too):
    # the shared metastore records database locations under it
    os.environ.setdefault("WIDEHOUSE_HIVE_WAREHOUSE", str(path / "hive" / "warehouse"))
    return path


@pytest.fixture(scope="session")
def settings(state_dir: Path) -> Settings:
    return settings_for(state_dir)


def _running(settings: Settings, names: list[str] | None) -> Iterator[Settings]:
    """Start the services ``names`` (None: all) that do not answer yet; stop those at the end."""
    manager = ServiceManager(settings.local)
    started = manager.up_missing(names)
    try:
        yield settings
    finally:
        manager.down(started)


@pytest.fixture(scope="session")
def metastore(settings: Settings) -> Iterator[Settings]:
    """The Hive metastore service every Spark process of the session shares."""
    if settings.hive.metastore_uri != settings.local.hive_metastore_uri:
        yield settings  # a remote metastore (or WIDEHOUSE_HIVE_METASTORE_URI=embedded): not ours to run
        return
    yield from _running(settings, ["metastore"])


@pytest.fixture(scope="session")
def services(settings: Settings, metastore: Settings) -> Iterator[Settings]:
    """Real Pulsar, HBase, HBase Thrift, ClickHouse and the metastore for the session (each reused if
    already running)."""
    yield from _running(settings, [n for n in ServiceManager(settings.local).services if n != "metastore"])


@pytest.fixture(autouse=True)
def _pulsar_can_take_writes(request: pytest.FixtureRequest) -> None:
    """A test of the services fails at once, naming the disk, when Pulsar's bookie could take no
    writes: a shared disk filling up during a run otherwise makes every later producer time out
    (30 s each; one CI run lost 76 tests and 80 minutes that way)."""
    if "services" not in request.fixturenames:
        return
    from widehouse.services.pulsar import PulsarStandalone

    full = PulsarStandalone(request.getfixturevalue("settings").local).full_disk()
    if full is not None:
        pytest.fail(full, pytrace=False)


@pytest.fixture(scope="session")
def spark(settings: Settings, metastore: Settings) -> Iterator[Any]:
    from widehouse.spark.session import build_session

    session = build_session(settings, "widehouse-tests", overrides=SPARK_TEST_CONF)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def warehouse(services: Settings) -> Iterator[Any]:
    """A ClickHouse client on the session's ClickHouse (the local service or
    ``WIDEHOUSE_TEST_CLICKHOUSE_DSN``)."""
    from widehouse import clickhouse

    client = clickhouse.connect(services.clickhouse)
    yield client
    client.close()

"""`widehouse services up|status|down` on the real JVM services, as a user runs them.

Runs a second, private set of services (own state dir, own free ports) so it can stop them without
disturbing the session's shared services.
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

from widehouse import clickhouse
from widehouse.errors import ClickHouseError
from widehouse.jvm import JIT_OPTIONS, common_pool_option
from widehouse.services.metastore import list_databases, thrift_call
from widehouse.services.process import find_marked_pids
from widehouse.settings import load_settings

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PORT_VARIABLES = (
    "WIDEHOUSE_PULSAR_BROKER_PORT",
    "WIDEHOUSE_PULSAR_WEB_PORT",
    "WIDEHOUSE_HBASE_ZK_PORT",
    "WIDEHOUSE_HBASE_MASTER_PORT",
    "WIDEHOUSE_HBASE_MASTER_INFO_PORT",
    "WIDEHOUSE_HBASE_REGIONSERVER_PORT",
    "WIDEHOUSE_HBASE_THRIFT_PORT",
    "WIDEHOUSE_HBASE_THRIFT_INFO_PORT",
    "WIDEHOUSE_CLICKHOUSE_PORT",
    "WIDEHOUSE_HIVE_METASTORE_PORT",
)
SERVICES = ("pulsar", "hbase", "hbase-thrift", "clickhouse", "metastore")


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for s in sockets:
            s.close()


def create_database(port: int, name: str) -> None:
    """``ThriftHiveMetastore.create_database(Database(name=name))``: a catalog write over raw Thrift."""
    encoded = name.encode()
    database = bytes([11]) + struct.pack(">hi", 1, len(encoded)) + encoded + bytes([0])  # name, STOP
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        reader = thrift_call(sock, "create_database", bytes([12]) + struct.pack(">h", 1) + database)
        assert reader.exact(1) == bytes([0]), "create_database raised"  # void result: no exception field


def cli(env: dict[str, str], *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "widehouse", "services", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )


def test_up_twice_status_crash_and_down_leave_nothing(tmp_path: Path) -> None:
    env = {**os.environ, "WIDEHOUSE_STATE_DIR": str(tmp_path / "state")}
    env.update(zip(PORT_VARIABLES, map(str, free_ports(len(PORT_VARIABLES))), strict=True))
    markers = [f"-Dwidehouse.service={name}@{tmp_path / 'state'}" for name in SERVICES]
    try:
        t0 = time.monotonic()
        up = cli(env, "up")
        elapsed = time.monotonic() - t0
        assert up.returncode == 0, up.stdout + up.stderr
        assert "all selected services healthy" in up.stdout
        print(f"services up (cold) took {elapsed:.1f}s")

        status = cli(env, "status")
        assert status.returncode == 0, status.stdout + status.stderr
        assert [line.split()[1] for line in status.stdout.splitlines()[2:]] == ["running"] * len(SERVICES)

        # the broker's JVM runs the JIT profile set (C1 only by default): the pulsar script passes it on
        broker = int((tmp_path / "state/services/pulsar/pulsar.pid").read_text().split()[0])
        arguments = Path(f"/proc/{broker}/cmdline").read_bytes().decode().split("\0")
        profile = load_settings(env).local.pulsar_jit
        assert set(JIT_OPTIONS[profile].split()) <= set(arguments), profile
        assert common_pool_option() in arguments  # async continuations on pool threads, not one thread each

        again = cli(env, "up")
        assert again.returncode == 0
        assert again.stdout.count("already running") == len(SERVICES)
        assert "starting" not in again.stdout

        # ClickHouse data acknowledged before a SIGKILL of its service is there after `up`
        settings = load_settings(env)
        warehouse = clickhouse.connect(settings.clickhouse)
        warehouse.command(
            "CREATE TABLE kept (x UInt32) ENGINE = MergeTree ORDER BY x "
            "SETTINGS non_replicated_deduplication_window = 100"
        )
        warehouse.insert("kept", pa.table({"x": pa.array([1, 2, 3], pa.uint32())}), token="kept-1")

        # the metastore answers real catalog calls at its port; what it records is in its Derby database
        metastore_port = settings.local.hive_metastore_port
        assert list_databases("127.0.0.1", metastore_port) == ["default"]
        create_database(metastore_port, "kept_db")

        # crashed services: their pid files are stale; status says so and `up` restarts only them
        for name in ("hbase-thrift", "clickhouse", "metastore"):
            pid = int((tmp_path / f"state/services/{name}/{name}.pid").read_text().split()[0])
            os.kill(pid, signal.SIGKILL)
        time.sleep(1)
        status = cli(env, "status")
        assert status.returncode == 3
        states = {line.split()[0]: line.split()[1] for line in status.stdout.splitlines()[2:]}
        assert states == {
            "pulsar": "running",
            "hbase": "running",
            "hbase-thrift": "stopped",
            "clickhouse": "stopped",
            "metastore": "stopped",
        }
        with pytest.raises(ClickHouseError, match=r"127\.0\.0\.1"):
            clickhouse.connect(settings.clickhouse, connect_timeout=2)  # names where it looked
        restart = cli(env, "up")
        assert restart.returncode == 0, restart.stderr
        assert "hbase-thrift: starting" in restart.stdout
        assert "clickhouse: starting" in restart.stdout
        assert "metastore: starting" in restart.stdout  # over the Derby database the killed one held
        assert "pulsar: already running" in restart.stdout
        again = clickhouse.connect(settings.clickhouse)
        assert again.rows("SELECT x FROM kept ORDER BY x") == [(1,), (2,), (3,)]
        again.insert("kept", pa.table({"x": pa.array([1, 2, 3], pa.uint32())}), token="kept-1")
        assert again.scalar("SELECT count() FROM kept") == 3  # the replay after the crash: a no-op
        # the catalog written before the metastore's SIGKILL is there after its restart
        assert list_databases("127.0.0.1", metastore_port) == ["default", "kept_db"]
    finally:
        down = cli(env, "down")
    assert down.returncode == 0, down.stderr
    assert all(find_marked_pids(m) == [] for m in markers)
    assert not list((tmp_path / "state" / "services").glob("*/*.pid"))

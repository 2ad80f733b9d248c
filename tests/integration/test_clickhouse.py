"""The real ClickHouse engine through clickhouse-connect: the local service (or any server given by
WIDEHOUSE_TEST_CLICKHOUSE_DSN) over HTTP, and an in-process chDB engine."""

from __future__ import annotations

import uuid
from pathlib import Path

import pyarrow as pa
import pytest

from widehouse import clickhouse
from widehouse.errors import ClickHouseError
from widehouse.settings import ClickHouseSettings, Settings

pytestmark = [pytest.mark.integration, pytest.mark.clickhouse]


@pytest.fixture(autouse=True)
def _clickhouse_running(services: Settings) -> None:
    """These tests use the session's ClickHouse (the local service, started with the others)."""


def test_create_insert_arrow_and_query(settings: Settings) -> None:
    client = clickhouse.connect(settings.clickhouse)
    table = f"it_{uuid.uuid4().hex[:8]}"
    client.command(
        f"CREATE TABLE {table} (uid String, hour DateTime('UTC'), events UInt64, amount Float64) "
        "ENGINE = MergeTree ORDER BY (uid, hour)"
    )
    data = pa.table(
        {
            "uid": ["u1", "u2", "u1"],
            "hour": pa.array([1_700_000_000, 1_700_000_000, 1_700_003_600], pa.timestamp("s", tz="UTC")),
            "events": pa.array([3, 4, 5], pa.uint64()),
            "amount": [1.5, 2.0, 0.25],
        }
    )
    client.insert_arrow(table, data)
    assert client.query(
        f"SELECT uid, sum(events), sum(amount) FROM {table} GROUP BY uid ORDER BY uid"
    ).result_rows == [
        ("u1", 8, 1.75),
        ("u2", 4, 2.0),
    ]
    back = client.query_arrow(f"SELECT uid, events FROM {table} ORDER BY uid, hour")
    assert back.column("uid").to_pylist() == ["u1", "u1", "u2"]
    assert client.query("SELECT currentDatabase()").result_rows == [(settings.clickhouse.database,)]
    client.command(f"DROP TABLE {table}")


@pytest.mark.parametrize(
    ("compression", "sent"), [("auto", None), ("none", None), ("lz4", "lz4"), ("zstd", "zstd")]
)
def test_inserts_and_answers_travel_as_the_compression_setting_says(
    settings: Settings, compression: str, sent: str | None
) -> None:
    """``auto`` sends nothing compressed to the local service (a loopback host); each codec set
    travels both ways, and the rows come back the same."""
    import dataclasses

    chosen = dataclasses.replace(settings.clickhouse, compression=compression)
    client = clickhouse.connect(chosen)
    table = f"it_{uuid.uuid4().hex[:8]}"
    try:
        assert client.driver.write_compression == sent
        client.command(f"CREATE TABLE {table} (k UInt64, s String) ENGINE = MergeTree ORDER BY k")
        data = pa.table({"k": pa.array(range(2000), pa.uint64()), "s": [f"v{i % 7}" for i in range(2000)]})
        assert client.insert(table, data, f"{table}:1", folded=True) == 2000
        back = client.arrow(f"SELECT k, s FROM {table} ORDER BY k")
        assert back.column("k").to_pylist() == list(range(2000))
        assert back.column("s").to_pylist() == [f"v{i % 7}" for i in range(2000)]
    finally:
        client.command(f"DROP TABLE IF EXISTS {table}")
        client.close()


def test_engine_data_persists_across_clients(settings: Settings) -> None:
    table = f"it_{uuid.uuid4().hex[:8]}"
    first = clickhouse.connect(settings.clickhouse)
    first.command(f"CREATE TABLE {table} (x UInt8) ENGINE = MergeTree ORDER BY x")
    assert first.insert(table, pa.table({"x": pa.array([1, 2], pa.uint8())}), token="persist-1") == 2
    second = clickhouse.connect(settings.clickhouse)
    assert second.rows(f"SELECT x FROM {table} ORDER BY x") == [(1,), (2,)]
    second.drop([table])
    assert first.scalar(f"EXISTS TABLE {table}") == 0


def test_a_second_process_on_the_same_embedded_path_is_refused_clearly(tmp_path: Path) -> None:
    """chDB's rule: one process per data path. The error must say so, not just 'BAD_ARGUMENTS'."""
    import subprocess
    import sys

    dsn = f"chdb://{tmp_path / 'engine'}"
    holder = clickhouse.connect(ClickHouseSettings(dsn=dsn))  # this process holds the path now
    code = (
        "from widehouse import clickhouse\n"
        "from widehouse.settings import ClickHouseSettings\n"
        f"clickhouse.connect(ClickHouseSettings(dsn={dsn!r}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode != 0
    assert "held by another process" in out.stderr
    assert holder.query("SELECT 1").result_rows == [(1,)]


def test_unreachable_server_is_a_clear_error() -> None:
    with pytest.raises(ClickHouseError, match=r"ClickHouse at http://default:\*\*\*@127.0.0.1:1"):
        clickhouse.connect(ClickHouseSettings(dsn="http://default:pw@127.0.0.1:1/wh"), connect_timeout=2)


def test_database_from_the_dsn_path_wins() -> None:
    s = ClickHouseSettings(dsn="https://u:p@ch.example:8443/analytics", database="wh")
    assert clickhouse.database_name(s) == "analytics"
    assert clickhouse.database_name(ClickHouseSettings(dsn="chdb:///data/ch", database="wh")) == "wh"
    with pytest.raises(ClickHouseError, match="not a plain identifier"):
        clickhouse.database_name(ClickHouseSettings(dsn="http://h:1/a-b", database="wh"))

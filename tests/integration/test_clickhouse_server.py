"""The ClickHouse service (chDB behind ClickHouse's HTTP interface): real engine, real HTTP, real clients."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pyarrow as pa
import pytest
import urllib3

from tests.integration.clickhouse_server_support import PASSWORD, USER, ServerProcess

pytestmark = pytest.mark.integration

MAX_BODY = 4 << 20
UTC = dt.UTC


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path_factory.mktemp("chs") / "data", max_body_bytes=MAX_BODY).start()
    yield proc
    assert proc.stop() == 0


@pytest.fixture
def ch(server: ServerProcess) -> Any:
    return server.client()


def _table(ch: Any, ddl_columns: str, engine: str = "MergeTree ORDER BY tuple()") -> str:
    name = f"t_{uuid.uuid4().hex[:10]}"
    ch.command(f"CREATE TABLE {name} ({ddl_columns}) ENGINE = {engine}")
    return name


def _post(
    server: ServerProcess, body: bytes | str, headers: dict[str, str] | None = None, **params: str
) -> Any:
    """A raw HTTP request, as any HTTP client would send it."""
    auth = urllib3.make_headers(basic_auth=f"{USER}:{PASSWORD}")
    url = f"{server.url}/?{urlencode(params)}"
    return urllib3.request("POST", url, body=body, headers={**auth, **(headers or {})})


# -------------------------------------------------------------------------------- basics
def test_ping_and_clickhouse_connect_connects(server: ServerProcess) -> None:
    reply = urllib3.request("GET", server.url + "/ping")
    assert (reply.status, reply.data) == (200, b"Ok.\n")
    ch = server.client()
    assert ch.server_version.startswith("26.")
    assert ch.command("SELECT 1 + 1") == 2
    assert ch.ping()


def test_native_and_arrow_round_trips_keep_exact_values(ch: Any) -> None:
    table = _table(
        ch,
        "id UInt64, ts DateTime64(3, 'UTC'), n Nullable(Int32), lc LowCardinality(String), "
        "tp Tuple(a String, b Float64), price Decimal(18, 4), tags Array(String)",
        "MergeTree ORDER BY id",
    )
    base = dt.datetime(2024, 2, 29, 23, 59, 59, 123000, tzinfo=UTC)
    rows = [
        [i, base + dt.timedelta(milliseconds=i * 1001), None if i % 3 == 0 else -i, f"k{i % 7}",
         (f"s{i}", i / 4), Decimal(i) / Decimal(8), [str(i)] * (i % 3)]
        for i in range(5000)
    ]  # fmt: skip
    summary = ch.insert(table, rows, column_names=["id", "ts", "n", "lc", "tp", "price", "tags"])
    assert summary.written_rows == 5000

    back = ch.query(f"SELECT * FROM {table} ORDER BY id").result_rows
    assert [r[0] for r in back] == list(range(5000))
    assert [r[1].replace(tzinfo=UTC) for r in back] == [r[1] for r in rows]
    assert [r[2] for r in back] == [r[2] for r in rows]
    assert [r[3] for r in back] == [r[3] for r in rows]
    assert [(r[4]["a"], r[4]["b"]) for r in back] == [r[4] for r in rows]
    assert [r[5] for r in back] == [r[5] for r in rows]
    assert [r[6] for r in back] == [r[6] for r in rows]

    arrow = ch.query_arrow(f"SELECT id, ts, n, lc FROM {table} ORDER BY id")
    assert arrow.column("ts").type == pa.timestamp("ms", tz="UTC")
    assert arrow.column("ts").to_pylist() == [r[1] for r in rows]
    assert arrow.column("n").to_pylist() == [r[2] for r in rows]

    more = pa.table(
        {
            "id": pa.array(range(5000, 7000), pa.uint64()),
            "ts": pa.array([base] * 2000, pa.timestamp("ms", tz="UTC")),
            "n": pa.array([None, 7] * 1000, pa.int32()),
            "lc": pa.array(["arrow"] * 2000),
        }
    )
    assert ch.insert_arrow(table, more).written_rows == 2000
    got = ch.query(f"SELECT count(), countIf(n IS NULL), sum(id), min(ts) FROM {table} WHERE lc = 'arrow'")
    assert got.result_rows == [(2000, 1000, sum(range(5000, 7000)), base.replace(tzinfo=None))]


def test_a_replayed_insert_with_the_same_token_is_a_no_op(ch: Any) -> None:
    table = _table(
        ch, "id UInt64, v String", "MergeTree ORDER BY id SETTINGS non_replicated_deduplication_window = 1000"
    )
    rows = [[i, f"v{i}"] for i in range(30_000)]
    arrow = pa.table({"id": pa.array(range(100_000, 100_500), pa.uint64()), "v": ["a"] * 500})
    for _ in range(3):
        ch.insert(table, rows, column_names=["id", "v"], settings={"insert_deduplication_token": "batch-1"})
        ch.insert_arrow(table, arrow, settings={"insert_deduplication_token": "batch-a", "async_insert": 1})
    assert ch.command(f"SELECT count() FROM {table}") == 30_500
    ch.insert(table, rows[:10], column_names=["id", "v"], settings={"insert_deduplication_token": "batch-2"})
    assert ch.command(f"SELECT count() FROM {table}") == 30_510


def test_settings_database_parameters_and_sessions(server: ServerProcess, ch: Any) -> None:
    db = f"db_{uuid.uuid4().hex[:8]}"
    ch.command(f"CREATE DATABASE {db}")
    in_db = server.client(database=db)
    assert in_db.command("SELECT currentDatabase()") == db
    assert ch.command("SELECT currentDatabase()") == "default"
    assert ch.command("SELECT getSetting('max_threads')", settings={"max_threads": 1}) == 1
    assert ch.command("SELECT getSetting('max_threads')") != 1  # a request's setting does not stick
    assert ch.query("SELECT {x:UInt32} * 2, {s:String}", parameters={"x": 21, "s": "it's"}).result_rows == [
        (42, "it's")
    ]
    # a request's readonly or bad setting value leaves no trace on the engine handle that served it
    assert ch.command("SELECT getSetting('readonly')", settings={"readonly": 1}) == 1
    from clickhouse_connect.driver.exceptions import DatabaseError

    with pytest.raises(DatabaseError):
        ch.command("SELECT 1", settings={"max_threads": "many"})
    for i in range(8):
        ch.command(f"CREATE TABLE {db}.after_{i} (x UInt8) ENGINE = Memory")
    # SET and USE last for the session (clickhouse-connect gives each client one) and only for it
    session = server.client(database="")
    session.command("SET max_threads = 1")
    session.command(f"USE {db}")
    for _ in range(8):  # whichever engine handle serves the request
        assert session.command("SELECT getSetting('max_threads'), currentDatabase()") == ["1", db]
        assert server.client().command("SELECT getSetting('max_threads')") != 1


def test_bad_requests_get_clickhouse_errors_and_the_service_keeps_answering(server: ServerProcess) -> None:
    from clickhouse_connect.driver.exceptions import DatabaseError

    cases = [
        (b"SELECT * FROM no_such_table", {}, 60, 404, "UNKNOWN_TABLE"),
        (b"SELEC 1", {}, 62, 400, "SYNTAX_ERROR"),
        (b"SELECT 1", {"Authorization": "Basic " + _b64(f"{USER}:wrong")}, 516, 403, "AUTHENTICATION_FAILED"),
        (b"SELECT 1", {"X-ClickHouse-User": "nobody", "X-ClickHouse-Key": PASSWORD}, 516, 403, "nobody:"),
        (b"x" * (MAX_BODY + 1), {}, 229, 413, "exceeds the limit"),
        (b"SELECT 1", {"X-ClickHouse-Database": "no_such_db"}, 81, 404, "UNKNOWN_DATABASE"),
    ]
    for body, headers, code, status, text in cases:
        if "Authorization" in headers or "X-ClickHouse-User" in headers:
            reply = urllib3.request("POST", server.url + "/", body=body, headers=headers)
        else:
            reply = _post(server, body, headers)
        message = reply.data.decode()
        assert (reply.status, reply.headers["X-ClickHouse-Exception-Code"]) == (status, str(code)), message
        assert message.startswith(f"Code: {code}. DB::Exception: "), message
        assert text in message
        assert "(version 26." in message
    for insert in (
        b"INSERT INTO no_such_table FORMAT Native\n" + b"\x01" * 1000,
        b"INSERT INTO t FORMAT Nope\nxx",
    ):
        assert _post(server, insert).status in (400, 404)

    ch = server.client()
    with pytest.raises(DatabaseError) as info:
        ch.command("SELECT * FROM no_such_table")
    assert info.value.code == 60
    import clickhouse_connect

    with pytest.raises(DatabaseError) as wrong_password:
        clickhouse_connect.get_client(host="127.0.0.1", port=server.port, username=USER, password="nope")
    assert wrong_password.value.code == 516
    table = _table(ch, "id UInt64", "MergeTree ORDER BY id")
    bad_rows = _post(server, f"INSERT INTO {table} FORMAT TSV\n1\n2\nnot a number\n".encode())
    assert bad_rows.status == 400
    assert bad_rows.data.startswith(b"Code: "), bad_rows.data
    too_big = [[i] for i in range(MAX_BODY // 8 + 1000)]  # a streamed (chunked) body over the limit
    with pytest.raises(DatabaseError) as over:
        server.client(compress=False).insert(table, too_big, column_names=["id"])
    assert over.value.code == 229
    assert urllib3.request("GET", server.url + "/ping").data == b"Ok.\n"
    assert ch.command(f"SELECT count() FROM {table}") == 0
    assert ch.command("SELECT 42") == 42


def _b64(text: str) -> str:
    import base64

    return base64.b64encode(text.encode()).decode()


@pytest.mark.parametrize("compress", [True, "lz4", "zstd", "gzip"])
def test_compressed_inserts_and_replies(server: ServerProcess, compress: Any) -> None:
    ch = server.client(compress=compress)
    table = _table(ch, "id UInt64, s String", "MergeTree ORDER BY id")
    rows = [[i, "x" * (i % 50)] for i in range(50_000)]
    ch.insert(table, rows, column_names=["id", "s"])
    ch.insert_arrow(table, pa.table({"id": pa.array([10**9], pa.uint64()), "s": ["arrow"]}))
    assert ch.query(f"SELECT count(), sum(id), sum(length(s)) FROM {table}").result_rows == [
        (50_001, sum(range(50_000)) + 10**9, sum(i % 50 for i in range(50_000)) + 5)
    ]
    assert ch.query(f"SELECT id, s FROM {table} ORDER BY id").result_rows[:3] == [
        (0, ""),
        (1, "x"),
        (2, "xx"),
    ]


def test_a_reply_is_compressed_only_when_asked(server: ServerProcess) -> None:
    query = b"SELECT number FROM numbers(1000) FORMAT JSONEachRow"
    plain = _post(server, query)
    assert "Content-Encoding" not in plain.headers
    packed = _post(server, query, {"Accept-Encoding": "gzip"}, enable_http_compression="1")
    assert packed.headers["Content-Encoding"] == "gzip"
    assert packed.data == plain.data  # urllib3 decodes gzip itself
    raw = _post(server, gzip.compress(query), {"Content-Encoding": "gzip"})
    assert [json.loads(line)["number"] for line in raw.data.splitlines()] == list(range(1000))
    chunked = _post(server, iter([b"SELECT number FROM numbers(", b"3) FORMAT TSV"]))
    assert chunked.data == b"0\n1\n2\n"


# -------------------------------------------------------------------------------- processes and crashes
_WORKER = textwrap.dedent(
    """
    import sys, clickhouse_connect, pyarrow as pa
    port, user, password, table, worker = sys.argv[1:6]
    ch = clickhouse_connect.get_client(host="127.0.0.1", port=int(port), username=user, password=password)
    worker = int(worker)
    for batch in range(20):
        start = (worker * 20 + batch) * 10_000
        token = {"insert_deduplication_token": f"w{worker}-b{batch}"}
        for attempt in range(2):  # every batch is replayed once
            if batch % 2:
                ids = pa.array(range(start, start + 10_000), pa.uint64())
                ch.insert_arrow(table, pa.table({"id": ids, "w": pa.array([worker] * 10_000, pa.uint8())}),
                                settings=token)
            else:
                rows = [[i, worker] for i in range(start, start + 10_000)]
                ch.insert(table, rows, column_names=["id", "w"], settings=token)
        assert ch.command(f"SELECT count() FROM {table} WHERE w = {worker}") == (batch + 1) * 10_000
    print("done", worker)
    """
)


def test_two_processes_write_and_read_at_once(server: ServerProcess, ch: Any, tmp_path: Path) -> None:
    table = _table(
        ch, "id UInt64, w UInt8", "MergeTree ORDER BY id SETTINGS non_replicated_deduplication_window = 1000"
    )
    script = tmp_path / "worker.py"
    script.write_text(_WORKER)
    workers = [
        subprocess.Popen(
            [sys.executable, str(script), str(server.port), USER, PASSWORD, table, str(w)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for w in range(2)
    ]
    outputs = [p.communicate(timeout=300)[0] for p in workers]
    assert [p.returncode for p in workers] == [0, 0], outputs
    assert ch.query(f"SELECT count(), uniqExact(id), sum(id) FROM {table}").result_rows == [
        (400_000, 400_000, sum(range(400_000)))
    ]


def test_acknowledged_inserts_survive_sigkill_and_a_clean_stop(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = ServerProcess(data).start()
    ch = first.client()
    table = _table(ch, "id UInt64", "MergeTree ORDER BY id")
    for batch in range(10):
        ch.insert(table, [[i] for i in range(batch * 1000, (batch + 1) * 1000)], column_names=["id"])
    first.kill()

    second = ServerProcess(data).start()
    ch = second.client()
    assert ch.query(f"SELECT count(), sum(id) FROM {table}").result_rows == [(10_000, sum(range(10_000)))]
    ch.insert(table, [[10_000]], column_names=["id"])
    assert second.stop() == 0
    assert "stopped" in second.output()

    third = ServerProcess(data).start()
    assert third.client().command(f"SELECT count() FROM {table}") == 10_001
    assert third.stop() == 0


def test_a_second_service_on_the_same_data_dir_is_refused(server: ServerProcess) -> None:
    with pytest.raises(RuntimeError, match="exited with 1"):
        ServerProcess(server.data_dir).start()


@pytest.mark.parametrize("host", ["0.0.0.0", "8.8.8.8"])
def test_only_loopback_addresses_are_accepted(tmp_path: Path, host: str) -> None:
    argv = [sys.executable, "-m", "widehouse.clickhouse.server", "--data-dir", str(tmp_path), "--host", host]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "loopback" in done.stderr

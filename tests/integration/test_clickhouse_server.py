"""The ClickHouse service (chDB behind ClickHouse's HTTP interface): real engine, real HTTP, real clients."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
import uuid
import zlib
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
    env = {**os.environ, "WIDEHOUSE_CLICKHOUSE_PASSWORD": PASSWORD}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False, env=env)
    assert done.returncode == 2
    assert "loopback" in done.stderr


@pytest.mark.parametrize("password", [None, ""])
def test_the_service_refuses_to_start_without_a_password(tmp_path: Path, password: str | None) -> None:
    argv = [
        sys.executable,
        "-m",
        "widehouse.clickhouse.server",
        "--data-dir",
        str(tmp_path / "data"),
        "--port",
        "0",
    ]
    env = {k: v for k, v in os.environ.items() if k != "WIDEHOUSE_CLICKHOUSE_PASSWORD"}
    if password is not None:
        env["WIDEHOUSE_CLICKHOUSE_PASSWORD"] = password
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False, env=env)
    assert done.returncode == 2, done.stderr
    assert "WIDEHOUSE_CLICKHOUSE_PASSWORD" in done.stderr
    assert not (tmp_path / "data").exists()  # refused before the engine opened anything


# -------------------------------------------------------------------------------- safe by default
def _refused(reply: Any, code: int, status: int, *names: str) -> str:
    message = reply.data.decode()
    assert (reply.status, reply.headers.get("X-ClickHouse-Exception-Code")) == (status, str(code)), message
    assert message.startswith(f"Code: {code}. DB::Exception: "), message
    for name in names:
        assert name in message, message
    return message


def test_statements_that_reach_the_host_are_refused(server: ServerProcess, ch: Any, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the-secret-line\n")
    out = tmp_path / "out.csv"
    table = _table(ch, "id UInt64, s String", "MergeTree ORDER BY id")
    url = f"{server.url}/?query=SELECT+1"
    cases = [
        (f"SELECT * FROM file('{secret}', 'LineAsString')", "table function file"),
        (f"select * from `file` /* c */ ('{secret}', 'LineAsString')", "file"),
        (f"SELECT * FROM (SELECT * FROM file('{secret}', 'LineAsString'))", "file"),
        (f"WITH x AS (SELECT * FROM file('{secret}', 'LineAsString')) SELECT * FROM x", "file"),
        (f"DESCRIBE TABLE file('{secret}', 'LineAsString')", "file"),
        (f"SELECT FILE('{secret}')", "function FILE"),
        (f"INSERT INTO FUNCTION file('{out}', 'CSV', 'x UInt8') VALUES (1)", "file"),
        (f"INSERT INTO TABLE FUNCTION file('{out}', 'CSV', 'x UInt8') SELECT 1", "file"),
        (f"SELECT 1 INTO OUTFILE '{out}'", "INTO OUTFILE"),
        (f"select 1\ninto   outfile\n'{out}' format CSV", "INTO OUTFILE"),
        (f"INSERT INTO {table} FROM INFILE '{secret}' FORMAT CSV", "FROM INFILE"),
        (f"SELECT * FROM url('{url}', 'CSV')", "url"),
        ("SELECT * FROM s3('http://127.0.0.1:1/bucket/key.csv', 'CSV')", "s3"),
        ("SELECT * FROM remote('127.0.0.1', system.one)", "remote"),
        ("SELECT * FROM remoteSecure('127.0.0.1', system.one)", "remoteSecure"),
        ("SELECT * FROM executable('run.sh', 'CSV', 'x UInt8')", "executable"),
        ("SELECT * FROM mysql('127.0.0.1:1', 'db', 't', 'u', 'p')", "mysql"),
        ("SELECT * FROM hdfs('hdfs://127.0.0.1:1/x', 'CSV')", "hdfs"),
        ("CREATE TABLE t_file_engine (x UInt8) ENGINE = File(CSV)", "table engine File"),
        (f"CREATE TABLE t_url_engine (x UInt8) ENGINE = URL('{url}', CSV)", "URL"),
        ("CREATE TABLE t_exec_engine (x UInt8) ENGINE = Executable('run.sh', CSV)", "Executable"),
        (f"CREATE TABLE t_as_file AS file('{secret}', 'LineAsString')", "file"),
        (
            "CREATE DICTIONARY d_file (k UInt64, v String) PRIMARY KEY k "
            f"SOURCE(FILE(path '{secret}' format 'CSV')) LAYOUT(FLAT()) LIFETIME(0)",
            "dictionary source file",
        ),
        (f"INSERT INTO {table} VALUES (1, file('{secret}'))", "file() in INSERT data"),
        (f"INSERT INTO {table} VALUES (1, `file` /**/ ('{secret}'))", "file() in INSERT data"),
        (f"INSERT INTO {table} VALUES (1, /* /* */ ' */ file('{secret}') -- ')", "INSERT data"),
        (f"INSERT INTO {table} VALUES (1, $$ ' $$), (2, file('{secret}'))", "INSERT data"),
        (f"INSERT INTO {table} VALUES (1, `\\x66ile`('{secret}'))", "INSERT data"),
        (f"INSERT INTO {table} VALUES (1, {{'k': 1}}) (2, `file`('{secret}'))", "cannot be checked"),
        ("SYSTEM DROP DNS CACHE", "SYSTEM"),
        (f"BACKUP TABLE {table} TO File('{out}')", "BACKUP"),
        (f"SELECT 1 FORMAT Template SETTINGS format_template_resultset = '{secret}'", "format_template"),
    ]
    for sql, name in cases:
        _refused(_post(server, sql), 497, 403, "ACCESS_DENIED", name)
    # a second statement would run unchecked: refused like ClickHouse's HTTP interface does
    multi = _post(server, f"SELECT 1; SELECT * FROM file('{secret}', 'LineAsString')")
    assert "the-secret-line" not in _refused(multi, 62, 400, "Multi-statements")
    settings = _post(server, "SELECT 1", format_schema=str(secret))
    _refused(settings, 497, 403, "format_schema")
    # a streamed Values insert takes literals only: the expression is not run
    streamed = _post(server, f"INSERT INTO {table} FORMAT Values (2, file('{secret}'))")
    assert streamed.status >= 400, streamed.data
    from clickhouse_connect.driver.exceptions import DatabaseError

    with pytest.raises(DatabaseError) as through_client:
        ch.command(f"SELECT * FROM file('{secret}', 'LineAsString')")
    assert through_client.value.code == 497
    assert not out.exists()
    assert ch.command(f"SELECT count() FROM {table}") == 0
    assert ch.command("EXISTS TABLE t_file_engine") == 0
    assert ch.command("EXISTS DICTIONARY d_file") == 0
    # VALUES data is streamed into the Values format: a ';' in it starts no second statement
    victim = _table(ch, "x UInt8", "Memory")
    chained = _table(ch, "id UInt64, s String", "Memory")
    _post(server, f"INSERT INTO {chained} VALUES (1, 'a'); DROP TABLE {victim}")
    _post(server, f"INSERT INTO {chained} VALUES (2, 'b');\nSELECT 1 INTO OUTFILE '{out}'")
    chained_input = f"INSERT INTO {chained} SELECT * FROM input('id UInt64, s String') FORMAT Values (3, 'c')"
    _refused(_post(server, chained_input + f"; DROP TABLE {victim}"), 497, 403, "input")
    # data the router cannot find (here behind a nested comment) is refused, never run as SQL
    hidden = f"INSERT INTO {chained} /* /* */ ' */ VALUES (3, 'c'); DROP TABLE {victim}"
    _refused(_post(server, hidden), 62, 400, "Cannot tell where this INSERT's data starts")
    assert ch.command(f"EXISTS TABLE {victim}") == 1
    assert not out.exists()
    # VALUES data longer than max_query_size (not parsed as SQL) is scanned for calls too
    rows = ", ".join(f"({i}, 'v{i}')" for i in range(30_000))
    assert len(rows) > 256 << 10
    big = _post(server, f"INSERT INTO {table} VALUES {rows}, (30000, file('{secret}'))")
    _refused(big, 497, 403, "file() in INSERT data")
    assert ch.command(f"SELECT count() FROM {table}") == 0
    # what the project runs is still allowed
    assert ch.command("SELECT count() FROM numbers(10)") == 10
    ch.command(f"INSERT INTO {table} VALUES {rows}, (30000, concat('a', toString(toDate('2026-01-02'))))")
    assert ch.query(f"SELECT count(), max(id), argMax(s, id) FROM {table}").result_rows == [
        (30_001, 30_000, "a2026-01-02")
    ]


def _get(server: ServerProcess, sql: str) -> Any:
    auth = urllib3.make_headers(basic_auth=f"{USER}:{PASSWORD}")
    return urllib3.request("GET", f"{server.url}/?{urlencode({'query': sql})}", headers=auth)


def test_get_runs_only_read_only_statements(server: ServerProcess, ch: Any) -> None:
    table = _table(ch, "id UInt64", "MergeTree ORDER BY id")
    assert _get(server, "SELECT 40 + 2").data == b"42\n"
    assert _get(server, f"SELECT count() FROM {table}").data == b"0\n"
    assert _get(server, f"EXISTS TABLE {table}").data == b"1\n"
    assert _get(server, "SHOW DATABASES").status == 200
    assert _get(server, "DESCRIBE TABLE system.one").status == 200
    assert _get(server, "EXPLAIN SELECT 1").status == 200
    name = f"t_{uuid.uuid4().hex[:10]}"
    for sql in (
        f"INSERT INTO {table} VALUES (1)",
        f"INSERT INTO {table} FORMAT TSV\n2\n",
        f"CREATE TABLE {name} (x UInt8) ENGINE = Memory",
        f"DROP TABLE {table}",
        f"ALTER TABLE {table} DELETE WHERE 1",
        f"TRUNCATE TABLE {table}",
    ):
        _refused(_get(server, sql), 164, 403, "READONLY", "method GET implies readonly")
    assert ch.command(f"SELECT count() FROM {table}") == 0
    assert ch.command(f"EXISTS TABLE {name}") == 0
    ch.command(f"INSERT INTO {table} VALUES (1)")  # POST (clickhouse-connect's method) still writes
    assert ch.command(f"SELECT count() FROM {table}") == 1


def test_temporary_tables_do_not_outlive_their_request(server: ServerProcess, ch: Any) -> None:
    name = f"t_{uuid.uuid4().hex[:10]}"
    ch.command(f"CREATE TABLE {name} (s String) ENGINE = MergeTree ORDER BY s")
    assert _post(server, f"CREATE TEMPORARY TABLE {name} (s String)").status == 200
    for _ in range(6):  # the handle that held the temporary table serves these (the pool is LIFO)
        assert _post(server, f"INSERT INTO {name} VALUES ('real')").status == 200
    assert _post(server, "SELECT count() FROM system.tables WHERE is_temporary").data == b"0\n"
    assert ch.command(f"SELECT count() FROM default.{name}") == 6


def _raw(server: ServerProcess, head: bytes, timeout: float = 10.0) -> tuple[bytes, float]:
    """Send ``head`` on a fresh connection; the reply's status line and headers, and seconds to it."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", server.port), timeout=timeout) as sock:
        sock.sendall(head)
        reply = b""
        while b"\r\n\r\n" not in reply:
            data = sock.recv(65536)
            if not data:
                break
            reply += data
    return reply, time.monotonic() - started


def test_request_bodies_are_bounded_and_read_only_after_authentication(server: ServerProcess) -> None:
    auth = f"Authorization: Basic {_b64(f'{USER}:{PASSWORD}')}\r\n".encode()
    wrong = f"Authorization: Basic {_b64(f'{USER}:wrong')}\r\n".encode()
    # unauthenticated: answered at once, the announced body never awaited
    for extra in (
        b"Content-Length: 100000000\r\n",
        b"Content-Length: 1000000\r\n",
        b"Transfer-Encoding: chunked\r\n",
        b"Content-Type: multipart/form-data; boundary=xx\r\nContent-Length: 100000000\r\n",
    ):
        reply, seconds = _raw(server, b"POST / HTTP/1.1\r\nHost: x\r\n" + wrong + extra + b"\r\n--xx\r\n")
        assert reply.startswith(b"HTTP/1.1 403 "), reply
        assert seconds < 3
    # malformed sizes are 400, never a read until the client stops
    for extra in (
        b"Content-Length: -1\r\n",
        b"Content-Length: 12abc\r\n",
    ):
        reply, seconds = _raw(server, b"POST / HTTP/1.1\r\nHost: x\r\n" + auth + extra + b"\r\nSELECT 1")
        assert reply.startswith(b"HTTP/1.1 400 "), reply
        assert seconds < 3
    for size in (b"zz", b"-5", b"0x10"):
        head = (
            b"POST / HTTP/1.1\r\nHost: x\r\n" + auth + b"Transfer-Encoding: chunked\r\n\r\n" + size + b"\r\n"
        )
        reply, seconds = _raw(server, head + b"SELECT 1")
        assert reply.startswith(b"HTTP/1.1 400 "), reply
        assert seconds < 3
    # a chunk announced larger than the cap is refused before it is read
    head = b"POST / HTTP/1.1\r\nHost: x\r\n" + auth + b"Transfer-Encoding: chunked\r\n\r\n"
    reply, seconds = _raw(server, head + f"{MAX_BODY + 1:x}\r\nSELECT".encode())
    assert reply.startswith(b"HTTP/1.1 413 "), reply
    assert seconds < 3
    assert urllib3.request("GET", server.url + "/ping").data == b"Ok.\n"


def test_a_compressed_body_is_inflated_only_up_to_the_cap(server: ServerProcess) -> None:
    packer = zlib.compressobj(9, wbits=31)
    zeros = bytes(1 << 20)
    bomb = b"".join(packer.compress(zeros) for _ in range(128)) + packer.flush()  # 128 MiB in ~128 KiB
    assert len(bomb) < 1 << 20
    server.reset_peak_rss()
    before = server.peak_rss()
    reply = _post(server, bomb, {"Content-Encoding": "gzip"})
    _refused(reply, 229, 413, "exceeds the limit")
    assert server.peak_rss() - before < 48 << 20  # never inflated whole


def test_the_query_head_is_scanned_in_linear_time(server: ServerProcess) -> None:
    columns = ", ".join(f"c{i}" for i in range(6000)).encode()  # ~40 KB of tokens
    statement = b"INSERT INTO no_such_table (" + columns + b") FORMAT TSV\n1\n"
    chunked = (
        b"".join(b"1\r\n" + statement[i : i + 1] + b"\r\n" for i in range(len(statement))) + b"0\r\n\r\n"
    )
    auth = f"Authorization: Basic {_b64(f'{USER}:{PASSWORD}')}\r\n".encode()
    head = b"POST / HTTP/1.1\r\nHost: x\r\n" + auth + b"Transfer-Encoding: chunked\r\n\r\n"
    reply, seconds = _raw(server, head + chunked, timeout=30)
    assert reply.startswith(b"HTTP/1.1 404 "), reply  # it got as far as the engine: UNKNOWN_TABLE
    assert seconds < 5, seconds


# -------------------------------------------------------------------------------- caps
@pytest.fixture(scope="module")
def tight(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    caps = ("--max-connections", "4", "--max-execution-time", "2", "--max-memory-usage", str(64 << 20),
            "--acquire-timeout", "0.5", "--head-timeout", "1")  # fmt: skip
    proc = ServerProcess(tmp_path_factory.mktemp("tight") / "data", handles=1, extra_args=caps).start()
    yield proc
    assert proc.stop() == 0


def test_each_query_has_a_time_and_a_memory_cap(tight: ServerProcess) -> None:
    slow = "SELECT sleepEachRow(0.5) FROM numbers(20) SETTINGS max_block_size = 1"
    started = time.monotonic()
    _refused(_post(tight, slow), 159, 408, "TIMEOUT_EXCEEDED")
    assert time.monotonic() - started < 6
    assert _post(tight, "SELECT 42").data == b"42\n"  # nothing of the stopped query leaks into it
    _refused(
        _post(tight, "SELECT groupArray(number) FROM numbers(20000000)"), 241, 500, "MEMORY_LIMIT_EXCEEDED"
    )
    # a request may lower a cap, not lift or remove it
    lowered = _post(tight, "SELECT getSetting('max_execution_time')", max_execution_time="1")
    assert lowered.data == b"1\n"
    for value in ("0", "3600"):
        _refused(_post(tight, "SELECT 1", max_execution_time=value), 452, 500, "max_execution_time")
        _refused(_post(tight, f"SELECT 1 SETTINGS max_execution_time = {value}"), 452, 500, "1..2")
    _refused(_post(tight, "SET max_memory_usage = 0"), 452, 500, "max_memory_usage")
    assert _post(tight, "SELECT getSetting('max_execution_time')").data == b"2\n"


def test_a_request_waits_for_an_engine_handle_a_bounded_time(tight: ServerProcess) -> None:
    busy = threading.Thread(
        target=_post, args=(tight, "SELECT sleepEachRow(0.3) FROM numbers(5) SETTINGS max_block_size = 1")
    )
    busy.start()
    time.sleep(0.3)
    started = time.monotonic()
    waiting = _post(tight, "SELECT 1")
    busy.join()
    _refused(waiting, 202, 503, "TOO_MANY_SIMULTANEOUS_QUERIES", "--acquire-timeout")
    assert time.monotonic() - started < 1.5
    assert _post(tight, "SELECT 1").data == b"1\n"


def test_open_connections_are_capped(tight: ServerProcess) -> None:
    idle = [socket.create_connection(("127.0.0.1", tight.port), timeout=5) for _ in range(4)]
    try:
        with socket.create_connection(("127.0.0.1", tight.port), timeout=5) as extra:
            reply = extra.recv(65536)  # answered at once, before it sends anything
        assert reply.startswith(b"HTTP/1.1 503 "), reply
        assert b"X-ClickHouse-Exception-Code: 202" in reply
        assert b"--max-connections" in reply
    finally:
        for sock in idle:
            sock.close()
    time.sleep(0.3)
    reply, _ = _raw(tight, b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
    assert reply.startswith(b"HTTP/1.1 200 "), reply


def test_a_client_that_sends_its_query_too_slowly_is_cut_off(tight: ServerProcess) -> None:
    auth = f"Authorization: Basic {_b64(f'{USER}:{PASSWORD}')}\r\n".encode()
    head = b"POST / HTTP/1.1\r\nHost: x\r\n" + auth + b"Transfer-Encoding: chunked\r\n\r\n"
    with socket.create_connection(("127.0.0.1", tight.port), timeout=10) as sock:
        sock.sendall(head + b"6\r\nINSERT\r\n")
        time.sleep(1.3)
        sock.sendall(b"1\r\n \r\n")
        reply = sock.recv(65536)
    assert reply.startswith(b"HTTP/1.1 408 "), reply


_FLAKY_POOL = textwrap.dedent(
    """
    import sys
    import chdb
    from pathlib import Path
    from widehouse.clickhouse.server.engine import EnginePool
    from widehouse.clickhouse.server.protocol import QueryError

    class Flaky:  # the real engine, whose connect can be made to fail
        failing = False

        def connect(self, path):
            if self.failing:
                raise RuntimeError("injected: cannot open a connection")
            return chdb.connect(path)

    pool = EnginePool(Path(sys.argv[1]), 1, acquire_timeout=1.0)
    pool._chdb = flaky = Flaky()
    flaky.failing = True
    try:
        with pool.handle() as handle:
            handle.prepare("default", {"max_threads": "many"})  # a bad SET: the handle is reopened
    except QueryError as exc:
        print("request failed:", exc.code)
    try:
        with pool.handle() as handle:
            print("lent a handle while the engine cannot open one")
    except QueryError as exc:
        print("refused while broken:", exc.code)
    flaky.failing = False
    with pool.handle() as handle:
        print("after recovery:", handle.query(b"SELECT 40 + 2", "TSV", {}).data.decode().strip())
    pool.close()
    """
)


def test_a_failed_reopen_never_leaves_a_dead_handle_in_the_pool(tmp_path: Path) -> None:
    script = tmp_path / "flaky.py"
    script.write_text(_FLAKY_POOL)
    argv = [sys.executable, str(script), str(tmp_path / "data")]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    expected = ["request failed: 439", "refused while broken: 439", "after recovery: 42"]
    assert done.stdout.splitlines() == expected


def test_a_client_that_sends_its_request_head_too_slowly_is_cut_off(tight: ServerProcess) -> None:
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", tight.port), timeout=10) as sock:
        sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\n")
        try:
            for _ in range(8):  # a header byte every half second, never the blank line
                time.sleep(0.5)
                sock.sendall(b"X")
            closed = sock.recv(65536) == b""
        except (ConnectionResetError, BrokenPipeError):  # reset: closed as well
            closed = True
    assert closed
    assert time.monotonic() - started < 3.5
    reply, _ = _raw(tight, b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
    assert reply.startswith(b"HTTP/1.1 200 "), reply

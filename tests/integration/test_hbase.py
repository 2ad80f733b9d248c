"""Real HBase standalone through its Thrift (v1) server with happybase."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
import sys
import uuid
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests.conftest import settings_for
from widehouse import hbase
from widehouse.catalog import load_catalog
from widehouse.errors import HBaseError
from widehouse.hbase.day import FamilyWriter, get_row, scan_bucket, write_family
from widehouse.hbase.daytable import DayTable, day_table
from widehouse.hbase.refresh import write_stream_batches
from widehouse.settings import HBaseSettings, Settings

pytestmark = pytest.mark.integration


@pytest.fixture
def table(services: Settings) -> Iterator[Any]:
    name = f"it_{uuid.uuid4().hex[:8]}"
    connection = hbase.connect(services.hbase)
    # pre-split on salt buckets, two column families (stream and offline), as the day table will be
    connection.create_table(name, {"s": {"max_versions": 1}, "h": {"max_versions": 1}})
    try:
        yield connection.table(name)
    finally:
        connection.delete_table(name, disable=True)
        connection.close()


def test_put_and_scan_two_families(table: Any) -> None:
    rows = {
        f"{salt:02d}|20261121|u{salt}{i}".encode(): {b"s:events": str(i).encode(), b"h:pay_total": b"9.5"}
        for salt in range(4)
        for i in range(5)
    }
    with table.batch(batch_size=7) as batch:
        for key, data in rows.items():
            batch.put(key, data)
    assert dict(table.scan()) == rows
    # a salt bucket is a key prefix: the extract job scans buckets in parallel
    bucket = dict(table.scan(row_prefix=b"02|"))
    assert set(bucket) == {k for k in rows if k.startswith(b"02|")}
    # one family only
    only_stream = dict(table.scan(columns=[b"s"]))
    assert all(set(v) == {b"s:events"} for v in only_stream.values())


def test_puts_of_absolute_values_are_idempotent(table: Any) -> None:
    for _ in range(3):
        table.put(b"00|20261121|u1", {b"s:events": b"7"})
    assert table.row(b"00|20261121|u1") == {b"s:events": b"7"}
    assert len(list(table.scan())) == 1


def test_unreachable_thrift_server_is_a_clear_error() -> None:
    with pytest.raises(HBaseError, match=r"cannot reach the HBase Thrift server at 127.0.0.1:1"):
        hbase.connect(HBaseSettings(host="127.0.0.1", port=1, timeout_ms=2000))


# ------------------------------------------------------------------ packed day rows (real HBase)
DAY = dt.date(2026, 11, 22)


def _spec(name: str, buckets: int) -> DayTable:
    return DayTable(
        name=name,
        buckets=buckets,
        key_name="uid",
        key_type="long",
        stream=(("logins", "count"), ("last_country", "string")),
        offline=(("pay_amount_usd", "double"),),
    )


def _salt(uid: int, buckets: int) -> int:  # the documented salt, computed here independently
    return zlib.crc32(str(uid).encode()) % buckets


def test_stream_rows_in_bucket_order_are_packed_and_pruned_bucket_by_bucket(table: Any) -> None:
    spec = _spec(table.name.decode(), 4)
    uids = list(range(10000001, 10000013))
    by_bucket = sorted(uids, key=lambda u: (_salt(u, 4), u))
    # before: an old stream row of a user the stream no longer has (it loses s, keeps h), and an
    # offline-only row that the stream must not touch
    gone = next(u for u in range(20000001, 20000100) if _salt(u, 4) == 3)
    day_rows = [(gone, {b"s:0": b"junk", b"h:0": b"keep"}), (30000001, {b"h:0": b"keep too"})]
    for uid, cells in day_rows:
        table.put(f"{_salt(uid, 4)}|20261122|{uid}".encode(), cells)
    data = pa.table(
        {
            "uid": pa.array(by_bucket, pa.int64()),
            "day": pa.array([DAY] * len(uids), pa.date32()),
            "logins": pa.array([u % 5 for u in by_bucket], pa.uint64()),
            "last_country": ["ID" if u % 2 else None for u in by_bucket],
            "_bucket": pa.array([_salt(u, 4) for u in by_bucket], pa.uint32()),
        }
    )
    writer = FamilyWriter(table, spec, "s", DAY)
    done = write_stream_batches(writer, data.to_batches(max_chunksize=5))  # blocks split buckets
    assert (done.rows, done.pruned) == (12, 1)
    assert table.row(f"3|20261122|{gone}".encode()) == {b"h:0": b"keep"}
    assert table.row(f"{_salt(30000001, 4)}|20261122|30000001".encode()) == {b"h:0": b"keep too"}
    row = table.row(f"{_salt(10000002, 4)}|20261122|10000002".encode())
    assert set(row) == {b"s:0"}  # one cell for the family
    got = get_row(table, spec, 10000002, DAY).to_pylist()
    assert got == [{"uid": 10000002, "day": DAY, "logins": 2, "last_country": None, "pay_amount_usd": None}]
    assert get_row(table, spec, 99999999, DAY).num_rows == 0
    # a re-run is a no-op; a bucket's scan decodes its rows
    again = write_stream_batches(FamilyWriter(table, spec, "s", DAY), data.to_batches(max_chunksize=7))
    assert (again.rows, again.pruned) == (12, 0)
    bucket = scan_bucket(table, spec, DAY, 1).to_pylist()
    expected = sorted(str(u) for u in uids if _salt(u, 4) == 1)
    assert [str(r["uid"]) for r in bucket] == expected
    assert all(r["logins"] == r["uid"] % 5 for r in bucket)


def test_hbase_get_prints_a_decoded_row(services: Settings, tmp_path: Path) -> None:
    prefix = f"it_{uuid.uuid4().hex[:6]}_"
    settings = settings_for(tmp_path, WIDEHOUSE_HBASE_TABLE_PREFIX=prefix, WIDEHOUSE_HBASE_SALT_BUCKETS="1")
    spec = day_table(load_catalog(settings.schemas_dir).table("user_daily"), settings.hbase)
    connection = hbase.connect(settings.hbase)
    connection.create_table(spec.name, {"s": {"max_versions": 1}, "h": {"max_versions": 1}})
    try:
        stream = {c: [None] for c, _ in spec.stream} | {"logins": [4], "last_country": ["VN"]}
        offline = {c: [None] for c, _ in spec.offline} | {"pay_amount_usd": [4.99]}
        target = connection.table(spec.name)
        write_family(target, spec, "s", DAY, pa.table({"uid": [10000001], **stream}))
        write_family(target, spec, "h", DAY, pa.table({"uid": [10000001], **offline}))
        command = [
            sys.executable,
            "-m",
            "widehouse",
            "hbase",
            "get",
            "--key",
            "10000001",
            "--day",
            "2026-11-22",
        ]
        env = {
            **os.environ,
            "WIDEHOUSE_STATE_DIR": str(tmp_path),
            "WIDEHOUSE_HBASE_TABLE_PREFIX": prefix,
            "WIDEHOUSE_HBASE_SALT_BUCKETS": "1",
        }
        shown = subprocess.run([*command, "--json"], capture_output=True, text=True, env=env, check=True)
        record = json.loads(shown.stdout)
        assert record["row"] == "0|20261122|10000001"
        assert (record["logins"], record["last_country"], record["pay_amount_usd"]) == (4, "VN", 4.99)
        assert record["login_failures"] == 0 and record["user_level"] is None
        text = subprocess.run(command, capture_output=True, text=True, env=env, check=True).stdout
        assert re.search(r"^s\s+last_country\s+VN$", text, re.M)
        assert re.search(r"^h\s+pay_amount_usd\s+4.99$", text, re.M)
        missing = subprocess.run(
            [*command[:6], "10000002", *command[7:]], capture_output=True, text=True, env=env, check=False
        )
        assert missing.returncode == 3 and "no row 0|20261122|10000002" in missing.stdout
    finally:
        connection.delete_table(spec.name, disable=True)
        connection.close()

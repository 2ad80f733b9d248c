"""Real HBase standalone through its Thrift (v1) server with happybase."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from widehouse import hbase
from widehouse.errors import HBaseError
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

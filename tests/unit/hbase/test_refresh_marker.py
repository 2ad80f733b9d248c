"""The refresh marker's row key and cell (pure logic; the skip itself runs against the real
services in tests/integration/test_daily_merge.py)."""

from __future__ import annotations

import datetime as dt

import pytest

from widehouse.hbase.keys import bucket_prefix
from widehouse.hbase.refresh import RefreshMarker, marker_row


def test_the_marker_row_sorts_after_every_bucket_of_the_day_and_is_no_buckets_row() -> None:
    day = dt.date(2026, 11, 22)
    assert marker_row(day) == b"~refresh|20261122"
    for buckets in (1, 16, 1000):
        last = bucket_prefix(buckets - 1, day, buckets)
        assert marker_row(day) > last + b"\xff"
        assert not marker_row(day).startswith(last)


def test_a_marker_round_trips_and_a_foreign_cell_is_no_marker() -> None:
    marker = RefreshMarker("ab" * 16, 1_000_000, "2026-11-22T23:05:00+00:00")
    assert marker.encode() == (
        b'{"fingerprint": "abababababababababababababababab", "refreshed_at": '
        b'"2026-11-22T23:05:00+00:00", "rows": 1000000}'
    )
    assert RefreshMarker.decode(marker.encode()) == marker


@pytest.mark.parametrize("cell", [b"", b"not json", b"[]", b'{"fingerprint": "x"}', b'{"rows": "many"}'])
def test_a_cell_that_is_not_a_marker_decodes_to_none(cell: bytes) -> None:
    assert RefreshMarker.decode(cell) is None

"""Cell encoding of day-table values: hand-written cells, and round trips through Arrow."""

from __future__ import annotations

import datetime as dt
import math

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from widehouse.errors import HBaseError
from widehouse.hbase.codec import arrow_type, decode_column, encode_column

UTC = dt.UTC


@pytest.mark.parametrize(
    ("values", "kind", "cells"),
    [
        (pa.array([0, 42, None], pa.uint64()), "count", [b"0", b"42", None]),
        (pa.array([-7, 2**63 - 1, None]), "long", [b"-7", b"9223372036854775807", None]),
        (pa.array([1, None], pa.int32()), "int", [b"1", None]),
        (pa.array([0.1, 1e20, 4.99, None]), "double", [b"0.1", b"1e+20", b"4.99", None]),
        (pa.array(["ID", "héllo", "", None]), "string", [b"ID", "héllo".encode(), b"", None]),
        (pa.array([True, False, None]), "boolean", [b"true", b"false", None]),
        (
            pa.array(
                [dt.datetime(2026, 11, 22, 9, 30, 0, 123000, tzinfo=UTC), None], pa.timestamp("ms", tz="UTC")
            ),
            "timestamp-ms",
            [b"1795339800123", None],
        ),
        (
            pa.array([dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC)], pa.timestamp("us", tz="UTC")),
            "timestamp-ms",
            [b"1000"],
        ),
        (pa.array([1795339800123, None]), "timestamp-ms", [b"1795339800123", None]),
    ],
)
def test_cells_by_hand(values: pa.Array, kind: str, cells: list[bytes | None]) -> None:
    assert encode_column(values, kind) == cells


def test_decoding_by_hand() -> None:
    assert decode_column([b"3", None], "count").to_pylist() == [3, 0]
    assert decode_column([b"3", None], "long").to_pylist() == [3, None]
    assert decode_column([b"true", b"false", None], "boolean").to_pylist() == [True, False, None]
    assert decode_column([b"1000", None], "timestamp-ms").to_pylist() == [
        dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC),
        None,
    ]
    assert decode_column([b"inf", b"nan"], "double").to_pylist()[0] == math.inf
    assert decode_column([b"1"], "int").type == pa.int32()


def test_bad_cells_name_the_column() -> None:
    with pytest.raises(HBaseError, match=r"cells of column logins are not valid long text"):
        decode_column([b"12x"], "long", "logins")
    with pytest.raises(HBaseError, match=r"unknown day-table value kind 'decimal'"):
        arrow_type("decimal")


def _round_trip(values: list[object], kind: str) -> list[object]:
    return decode_column(encode_column(pa.array(values, arrow_type(kind)), kind), kind).to_pylist()


@given(st.lists(st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1))))
def test_longs_round_trip(values: list[int | None]) -> None:
    assert _round_trip(values, "long") == values


@given(st.lists(st.one_of(st.none(), st.floats(allow_nan=False))))
def test_doubles_round_trip(values: list[float | None]) -> None:
    assert _round_trip(values, "double") == values


@given(st.lists(st.one_of(st.none(), st.text())))
def test_strings_round_trip(values: list[str | None]) -> None:
    assert _round_trip(values, "string") == values


@given(st.lists(st.one_of(st.none(), st.booleans())))
def test_booleans_round_trip(values: list[bool | None]) -> None:
    assert _round_trip(values, "boolean") == values


@given(
    st.lists(
        st.one_of(
            st.none(),
            st.datetimes(
                min_value=dt.datetime(1900, 1, 1), max_value=dt.datetime(2299, 12, 31), timezones=st.just(UTC)
            ),
        )
    )
)
def test_timestamps_round_trip_at_millisecond_precision(values: list[dt.datetime | None]) -> None:
    ms = [v.replace(microsecond=v.microsecond // 1000 * 1000) if v else None for v in values]
    assert _round_trip(ms, "timestamp-ms") == ms

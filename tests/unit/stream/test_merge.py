"""The driver's merge of partial rows per (key, hour), on hand-written partials of ``user_hourly``.

Expected rows are written out by hand: sums add, ``first`` keeps the smallest (ts, v) pair and ``last``
the largest (a tie on ts is broken by v), a missing pair never wins, and a (key, hour) with no pair
at all gets a null one. Rows come out sorted by (key, hour) whatever order the partitions gave them.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from widehouse.catalog import Catalog, load_catalog
from widehouse.stream.merge import merge
from widehouse.stream.output import output_schema
from widehouse.stream.plan import TransformPlan

ROOT = Path(__file__).parents[3]
TABLE = "user_hourly"
H = dt.datetime(2026, 11, 27, 10, tzinfo=dt.UTC)
H1 = H + dt.timedelta(hours=1)


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog(ROOT / "schemas")


def at(second: int) -> dt.datetime:
    return H + dt.timedelta(seconds=second)


def partials(catalog: Catalog, rows: list[dict[str, Any]]) -> pa.Table:
    """Partial rows in the shape :func:`merge` takes (key, hour, every column; unset: null)."""
    plan = TransformPlan(catalog, (TABLE,))
    prefix = plan.prefix(TABLE)
    fields = [
        pa.field(f.name.removeprefix(prefix), f.type)
        for f in output_schema(plan)
        if f.name.startswith(prefix)
    ]
    schema = pa.schema(fields)
    return pa.Table.from_pylist([{f.name: row.get(f.name) for f in fields} for row in rows], schema=schema)


def pair(second: int, value: Any) -> dict[str, Any]:
    return {"ts": at(second), "v": value}


def test_partials_merge_per_key_and_hour_by_each_columns_function(catalog: Catalog) -> None:
    rows = [
        {"uid": 2, "hour": H, "logins": 1, "last_country": pair(10, "a"), "first_live_room": pair(20, 5)},
        {"uid": 1, "hour": H1, "logins": 4},
        {"uid": 1, "hour": H, "last_country": pair(30, "x"), "first_live_room": pair(50, 9)},
        {"uid": 2, "hour": H, "logins": 2, "last_country": pair(30, "b"), "first_live_room": pair(20, 3)},
        {"uid": 1, "hour": H, "logins": 7, "last_country": pair(30, "y")},
        {"uid": 2, "hour": H, "last_country": None, "first_live_room": pair(40, 1)},
    ]
    merged = merge(partials(catalog, rows), catalog.table(TABLE))
    got = [
        (r["uid"], r["hour"], r["logins"], r["last_country"], r["first_live_room"], r["last_pay_channel"])
        for r in merged.to_pylist()
    ]
    assert got == [
        (1, H, 7, pair(30, "y"), pair(50, 9), None),  # a tie on ts: the larger value is the last
        (1, H1, 4, None, None, None),  # no pair in any partial: null
        (2, H, 3, pair(30, "b"), pair(20, 3), None),  # a tie on ts: the smaller value is the first
    ]
    assert merged.schema == partials(catalog, []).schema


def test_one_partial_per_key_and_hour_comes_out_as_it_went_in(catalog: Catalog) -> None:
    rows = [
        {"uid": 9, "hour": H1, "logins": 1, "last_app_version": pair(5, "1.2")},
        {"uid": 9, "hour": H, "logins": 2, "first_live_room": pair(6, 11)},
    ]
    merged = merge(partials(catalog, rows), catalog.table(TABLE))
    assert merged.to_pylist() == [
        {**partials(catalog, [rows[1]]).to_pylist()[0]},
        {**partials(catalog, [rows[0]]).to_pylist()[0]},
    ]


def test_null_keys_are_one_group_sorted_last(catalog: Catalog) -> None:
    rows = [
        {"uid": None, "hour": H, "logins": 1, "last_country": pair(1, "p")},
        {"uid": 3, "hour": H, "logins": 1},
        {"uid": None, "hour": H, "logins": 2, "last_country": pair(2, "q")},
    ]
    merged = merge(partials(catalog, rows), catalog.table(TABLE))
    assert [(r["uid"], r["logins"], r["last_country"]) for r in merged.to_pylist()] == [
        (3, 1, None),
        (None, 3, pair(2, "q")),
    ]

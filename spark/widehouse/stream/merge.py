"""Split the transform's tagged output and merge partial rows across input partitions, in Arrow.

The transform (:mod:`widehouse.stream.transform`) already collapses each input partition's events
per (key, hour); the same key and hour still appear once per partition that saw it. This module
merges those on the driver with the catalog's merge functions (sum; min; max; and for first/last
the smallest/largest (event time, value) pair), sorts the rows by (key, hour), and turns the side
rows into the quarantine and late tables' shape. Pure pyarrow: unit-tested without Spark.

Sums never wrap and never become infinite. The transform guarantees every partial sum it emits is in
its column's range (it quarantines the *event* that would overflow, reason ``overflow``), but
partials of one (key, hour) from several input partitions can still add up past it, and pyarrow's
``sum`` wraps int64 silently. The events behind a partial are no longer available on the driver, so
the unit quarantined here is the *partial sum*: :func:`settle` (run on the transform's output before
:func:`partials` and :func:`side`) finds, per ``sum`` column, every (key, hour) whose exact total
(int64 summed as decimal128; double sums checked for finiteness) is out of range, and keeps its
partials in ascending order of magnitude (ties: smaller value first) while the running total stays
in range: ``long`` sums by their signed total, so what is kept sums exactly; ``double`` sums by the
total of magnitudes, kept a 2**-20 margin under the largest double, so they sum finitely in any order.
Every partial sum left out is nulled in its partial row (the row's other columns, counts included,
still merge) and becomes a quarantine row with reason ``overflow``: the producing topic(s), a
message id ``merge:<table>.<column>:<key>@<hour>#<n>``, the hour as its publish time, a detail
naming the value and the total it would have made, and a JSON payload ``{table, column, key, hour,
value}``, so nothing accepted is lost: the wide row plus the quarantine hold every value. The choice
keeps small contributions and sets the largest aside, deterministically whatever the partition order.
A column whose largest magnitude times its number of partial rows is within range cannot overflow
anywhere and skips that exact grouping (virtually every batch's every column).

:func:`merge` applies the same rule (and logs a warning) if it is given unsettled rows, so it never
wraps or raises either; only :func:`settle` makes the left-out values visible in the quarantine.

What remains: ClickHouse merges partial rows *across* micro-batches with
``SimpleAggregateFunction(sum, ...)`` (Int64 wraps, Float64 reaches inf) and the Delta read-back sums
with Spark; no micro-batch writes an out-of-range value, but a running total over many batches can
still overflow there. Bounding per-event values (a catalog-declared maximum per sum field, checked
by the parser) would bound those totals too.
"""

from __future__ import annotations

import datetime as dt
import logging
import sys
from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from widehouse.catalog import OVERFLOW, WideTable
from widehouse.catalog.semantics.fold import sum_in_range
from widehouse.catalog.types import INT64
from widehouse.contracts.tables import COUNTS_SHAPE, LATE_SHAPE, QUARANTINE_SHAPE
from widehouse.stream.output import SIDE_COLUMNS
from widehouse.stream.plan import KIND_LATE, KIND_PARTIAL, KIND_QUARANTINE, KIND_STATS, TransformPlan

log = logging.getLogger("widehouse.stream")

_EXACT = pa.decimal128(38, 0)  # int64 partial sums add up exactly in 38 digits
_INT64_LOW = pa.scalar(Decimal(INT64[0]), _EXACT)
_INT64_HIGH = pa.scalar(Decimal(INT64[1]), _EXACT)
_DOUBLE_LIMIT = sys.float_info.max * (1 - 2**-20)
"""Kept double partials' magnitudes sum below this, so rounding in any order cannot reach inf."""


@dataclass(frozen=True)
class TopicStats:
    rows_in: int
    good: int
    bad: int
    late: int
    max_event_ms: int | None
    min_publish_ms: int | None
    max_publish_ms: int | None


def _kind(out: pa.Table, kind: str) -> pa.Table:
    """The rows of one kind, with the side columns only (what side and stats rows fill): selected
    before filtering, as a filter copies every column and the output carries every table's."""
    return out.select(SIDE_COLUMNS).filter(pc.equal(out["wh_kind"], kind))


def partials(out: pa.Table, plan: TransformPlan, name: str) -> pa.Table:
    """Merged partial rows of one wide table: key, hour, then its columns; sorted by (key, hour)."""
    table = plan.catalog.table(name)
    prefix = plan.prefix(name)
    names = [table.key_name, "hour", *[c.name for c in table.columns]]
    mask = pc.and_(pc.equal(out["wh_kind"], KIND_PARTIAL), pc.equal(out["wh_table"], name))
    # select before filtering: the output carries every table's columns, a filter copies them all
    rows = out.select([prefix + n for n in names]).filter(mask).rename_columns(names)
    return merge(rows, table)


@dataclass(frozen=True)
class Overflow:
    """A partial sum left out of the merge of its (key, hour) because the total would overflow."""

    column: str
    row: int
    """Its row in the partial rows given to :func:`overflows`."""
    key: Any
    hour: dt.datetime
    value: int | float
    total: int | float
    """The total of the (key, hour)'s partials with it (exact for long sums)."""


def overflows(rows: pa.Table, table: WideTable) -> list[Overflow]:
    """Partial sums to leave out so every ``sum`` column of ``rows`` (key, hour, columns: the shape
    :func:`partials` merges) merges within range; see the module docstring for the rule."""
    keys = [table.key_name, "hour"]
    found: list[Overflow] = []
    n = rows.num_rows
    columns = [c for c in table.columns if c.agg == "sum" and not _bounded(rows[c.name], n)]
    if not columns or n == 0:
        return found
    # every sum column's totals per (key, hour) in one grouping (exact: long sums as decimals)
    exact = {
        f"s{i}": rows[c.name] if pa.types.is_floating(rows[c.name].type) else rows[c.name].cast(_EXACT)
        for i, c in enumerate(columns)
    }
    sums = (
        pa.table({**{k: rows[k] for k in keys}, **exact})
        .group_by(keys, use_threads=False)
        .aggregate([(name, "sum") for name in exact])
    )
    for i, column in enumerate(columns):
        values = rows[column.name]
        is_double = pa.types.is_floating(values.type)
        total = sums[f"s{i}_sum"]
        bad = (
            pc.invert(pc.is_finite(total))
            if is_double
            else pc.or_(pc.less(total, _INT64_LOW), pc.greater(total, _INT64_HIGH))
        )
        flagged = sums.filter(bad)
        if flagged.num_rows == 0:
            continue
        flat = pa.table(
            {**{k: rows[k] for k in keys}, "v": values, "i": pa.array(range(rows.num_rows), pa.int64())}
        )
        present = flat.filter(pc.is_valid(flat["v"]))
        members = present.join(flagged.select(keys), keys=keys, join_type="inner")
        groups: dict[tuple[Any, dt.datetime], list[tuple[Any, int]]] = defaultdict(list)
        for row in members.to_pylist():
            groups[(row[keys[0]], row["hour"])].append((row["v"], row["i"]))
        for (key, hour), items in sorted(groups.items(), key=lambda g: (str(g[0][0]), g[0][1])):
            exact = sum(v for v, _ in items)
            kept: int | float = 0
            for value, index in sorted(items, key=lambda item: (abs(item[0]), item[0], item[1])):
                if is_double:
                    # alone, any finite value fits (0 + v is exact); past it, keep a safe margin
                    fits = kept == 0 or kept + abs(value) <= _DOUBLE_LIMIT
                    candidate = kept + abs(value)
                else:
                    candidate = kept + value
                    fits = sum_in_range(candidate)
                if fits:
                    kept = candidate
                else:
                    found.append(Overflow(column.name, index, key, hour, value, exact))
    return found


def _bounded(values: pa.ChunkedArray, rows: int) -> bool:
    """True when no total of ``rows`` of these partial sums can leave its type's range: the largest
    magnitude times the number of rows is within it. A sufficient check in one pass over the
    column, which spares :func:`overflows` its exact grouping in virtually every batch (the demo's
    largest sums are ~10^6 per row, against ~9.2 * 10^18 for a long). Doubles keep half the range
    for rounding, and any NaN or infinity takes the exact path."""
    if pa.types.is_floating(values.type) and pc.any(pc.is_nan(values)).as_py():
        return False  # min_max skips NaN
    extremes = pc.min_max(values)
    low, high = extremes["min"].as_py(), extremes["max"].as_py()
    if low is None:  # no value: nothing to add up
        return True
    bound = max(abs(low), abs(high)) * rows
    if isinstance(bound, float):
        return bound <= _DOUBLE_LIMIT / 2  # False for an infinity
    return bool(bound <= INT64[1])


def settle(out: pa.Table, plan: TransformPlan) -> pa.Table:
    """The transform's output with every partial sum that would overflow the merge of its (key, hour)
    nulled and quarantined (reason ``overflow``); unchanged if none would. Run before :func:`partials`
    and :func:`side` (see the module docstring for the rule)."""
    is_partial = pc.equal(out["wh_kind"], KIND_PARTIAL)
    nulled: dict[str, list[int]] = defaultdict(list)
    quarantine: list[dict[str, Any]] = []
    for name in plan.tables:
        table = plan.catalog.table(name)
        prefix = plan.prefix(name)
        where = pc.indices_nonzero(pc.and_(is_partial, pc.equal(out["wh_table"], name)))
        if len(where) == 0:
            continue
        # what overflows() reads: the keys and the sum columns
        names = [table.key_name, "hour", *[c.name for c in table.columns if c.agg == "sum"]]
        rows = out.select([prefix + n for n in names]).take(where).rename_columns(names)
        numbered: dict[tuple[str, Any, dt.datetime], int] = defaultdict(int)
        for found in overflows(rows, table):
            nulled[prefix + found.column].append(where[found.row].as_py())
            n = numbered[(found.column, found.key, found.hour)]
            numbered[(found.column, found.key, found.hour)] += 1
            quarantine.append(_overflow_row(plan, name, found, n))
    if not quarantine:
        return out
    log.warning("%d partial sums left out of their merge (overflow), quarantined", len(quarantine))
    for column, positions in nulled.items():
        out = _null_at(out, column, positions)
    return pa.concat_tables([out, pa.Table.from_pylist(quarantine, schema=out.schema)])


def _null_at(rows: pa.Table, column: str, positions: list[int]) -> pa.Table:
    """``rows`` with ``column`` set to null at ``positions``."""
    mask = [False] * rows.num_rows
    for position in positions:
        mask[position] = True
    index = rows.schema.get_field_index(column)
    field = rows.schema.field(index)
    return rows.set_column(
        index, field, pc.if_else(pa.array(mask), pa.scalar(None, field.type), rows[column])
    )


def _overflow_row(plan: TransformPlan, table: str, found: Overflow, n: int) -> dict[str, Any]:
    """The quarantine row of a partial sum left out of its merge."""
    topics = sorted({str(t.name) for t, _ in plan.catalog.producers(table, found.column)})
    hour_ms = int(found.hour.timestamp()) * 1000
    payload = orjson.dumps(
        {"table": table, "column": found.column, "key": found.key, "hour": hour_ms, "value": found.value}
    )
    return {
        "wh_kind": KIND_QUARANTINE,
        "wh_table": table,
        "wh_topic": ",".join(topics),
        "wh_message_id": f"merge:{table}.{found.column}:{found.key}@{found.hour.isoformat()}#{n}",
        "wh_publish_time": found.hour,
        "wh_event_time": found.hour,
        "wh_key": str(found.key),
        "wh_reason": OVERFLOW,
        "wh_detail": (
            f"{table}.{found.column}: partial sum {found.value!r} of key {found.key!r} at "
            f"{found.hour.isoformat()} is left out of the merge: with the other partials the sum would "
            f"be {found.total!r}, outside its type's range"
        ),
        "wh_payload": payload,
        "wh_payload_bytes": len(payload),
    }


def merge(rows: pa.Table, table: WideTable) -> pa.Table:
    """Merge partial rows per (key, hour) (any number of rows per key and hour). A partial sum that
    would overflow is left out, never wrapped (:func:`settle` quarantines those first)."""
    keys = [table.key_name, "hour"]
    if rows.num_rows == 0:
        return rows
    left_out = overflows(rows, table)
    if left_out:
        log.warning(
            "%s: %d partial sums left out of the merge (overflow) without quarantine: run settle() first",
            table.name,
            len(left_out),
        )
        for name in sorted({o.column for o in left_out}):
            rows = _null_at(rows, name, [o.row for o in left_out if o.column == name])
    plain = [c for c in table.columns if not c.is_pair]
    grouped = rows.group_by(keys, use_threads=False).aggregate([(c.name, c.merge_function) for c in plain])
    grouped = grouped.rename_columns({f"{c.name}_{c.merge_function}": c.name for c in plain})
    grouped = grouped.sort_by([(k, "ascending") for k in keys])
    pairs = [c for c in table.columns if c.is_pair]
    if pairs:
        # the partial rows in (key, hour) order: group g holds rows starts[g] .. starts[g + 1] - 1,
        # the same groups in the same order as the sorted aggregate above
        key_columns = rows.select(keys)
        order = pc.sort_indices(key_columns, sort_keys=[(k, "ascending") for k in keys])
        group, starts = _groups(key_columns.take(order))
        for column in pairs:
            best = _best_pairs(rows[column.name].take(order), group, starts, column.agg)
            grouped = grouped.append_column(column.name, best)
    ordered = grouped.select([*keys, *[c.name for c in table.columns]])
    return ordered.cast(rows.schema)


def _groups(ordered: pa.Table) -> tuple[pa.Array, pa.Array]:
    """For rows sorted by all their columns: each row's group number (0, 1, ...) and the row each
    group starts at. Two nulls are the same value, as in a grouping."""
    if ordered.num_rows < 2:
        changed = pa.array([True] * ordered.num_rows)
    else:
        flags = []
        for name in ordered.column_names:
            values = ordered[name].combine_chunks()
            after, before = values.slice(1), values.slice(0, len(values) - 1)
            differs = pc.not_equal(after, before)
            # null against null: the same group; null against a value: a new one
            flags.append(pc.fill_null(differs, pc.xor(pc.is_null(after), pc.is_null(before))))
        new = flags[0]
        for flag in flags[1:]:
            new = pc.or_(new, flag)
        changed = pa.concat_arrays([pa.array([True]), new])
    group = pc.subtract(pc.cumulative_sum(changed.cast(pa.int64())), 1)
    return group, pc.indices_nonzero(changed)


def _best_pairs(values: pa.ChunkedArray, group: pa.Array, starts: pa.Array, agg: str) -> pa.StructArray:
    """Per group (see :func:`_groups`, ``values`` in the same row order), the smallest (first) or
    largest (last) non-null (ts, v) pair by ts then v; null where the group has none."""
    pairs = values.combine_chunks()
    ts, v = pc.struct_field(pairs, "ts"), pc.struct_field(pairs, "v")
    order = "ascending" if agg == "first" else "descending"
    ranked = pa.table({"g": group, "missing": pc.is_null(pairs), "ts": ts, "v": v})
    best = pc.sort_indices(
        ranked, sort_keys=[("g", "ascending"), ("missing", "ascending"), ("ts", order), ("v", order)]
    ).take(starts)
    best_ts, best_v = ts.take(best), v.take(best)
    # a pair without its time is no pair (as the fold writes them, both are set or neither)
    return pa.StructArray.from_arrays([best_ts, best_v], fields=list(pairs.type), mask=pc.is_null(best_ts))


def side(out: pa.Table, kind: str, app: str, group: str, batch_id: int) -> pa.Table:
    """Quarantine or late rows in their tables' declared shape (:mod:`widehouse.contracts.tables`),
    sorted by (topic, message id): the batch's identity, then each column from the transform's
    ``wh_<column>``."""
    shapes = {KIND_QUARANTINE: QUARANTINE_SHAPE, KIND_LATE: LATE_SHAPE}
    if kind not in shapes:
        raise ValueError(kind)
    rows = _kind(out, kind).sort_by([("wh_topic", "ascending"), ("wh_message_id", "ascending")])
    schema = shapes[kind].arrow_schema()
    identity: dict[str, Any] = {"app": app, "group": group, "batch_id": batch_id}
    columns = [
        pa.array([identity[f.name]] * rows.num_rows, f.type)
        if f.name in identity
        else rows[f"wh_{f.name}"].cast(f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def topic_stats(out: pa.Table) -> dict[str, TopicStats]:
    """Per topic: rows in, good, bad, late; largest event time and publish-time range (epoch ms)."""
    stats = _kind(out, KIND_STATS)
    if stats.num_rows == 0:
        return {}
    as_ms = {
        name: pc.divide(stats[name].cast(pa.int64()), 1000)
        for name in ("wh_max_event_time", "wh_min_publish_time", "wh_max_publish_time")
    }
    table = pa.table(
        {
            "topic": stats["wh_topic"],
            "rows_in": stats["wh_rows_in"],
            "good": stats["wh_good"],
            "bad": stats["wh_bad"],
            "late": stats["wh_late"],
            "max_event": as_ms["wh_max_event_time"],
            "min_publish": as_ms["wh_min_publish_time"],
            "max_publish": as_ms["wh_max_publish_time"],
        }
    )
    grouped = table.group_by("topic").aggregate(
        [
            ("rows_in", "sum"),
            ("good", "sum"),
            ("bad", "sum"),
            ("late", "sum"),
            ("max_event", "max"),
            ("min_publish", "min"),
            ("max_publish", "max"),
        ]
    )
    result = {}
    for row in grouped.to_pylist():
        result[row["topic"]] = TopicStats(
            rows_in=row["rows_in_sum"],
            good=row["good_sum"],
            bad=row["bad_sum"],
            late=row["late_sum"],
            max_event_ms=row["max_event_max"],
            min_publish_ms=row["min_publish_min"],
            max_publish_ms=row["max_publish_max"],
        )
    return result


def hour_counts(out: pa.Table, app: str, group: str, batch_id: int) -> pa.Table:
    """Messages read per (topic, publish hour): in, valid (out), bad, late, in the shape of
    :data:`~widehouse.contracts.tables.COUNTS_SHAPE`, sorted by (topic, hour). The transform's stats
    rows are per input partition; this sums them."""
    schema = COUNTS_SHAPE.arrow_schema()
    stats = _kind(out, KIND_STATS)
    if stats.num_rows == 0:
        return schema.empty_table()
    grouped = (
        pa.table(
            {
                "topic": stats["wh_topic"],
                "publish_hour": stats["wh_publish_time"],
                "rows_in": stats["wh_rows_in"],
                "rows_out": stats["wh_good"],
                "bad": stats["wh_bad"],
                "late": stats["wh_late"],
            }
        )
        .group_by(["topic", "publish_hour"])
        .aggregate([("rows_in", "sum"), ("rows_out", "sum"), ("bad", "sum"), ("late", "sum")])
        .sort_by([("topic", "ascending"), ("publish_hour", "ascending")])
    )
    identity: dict[str, Any] = {"app": app, "group": group, "batch_id": batch_id}
    columns = [
        pa.array([identity[f.name]] * grouped.num_rows, f.type)
        if f.name in identity
        else grouped[f.name if f.name in ("topic", "publish_hour") else f"{f.name}_sum"].cast(f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)

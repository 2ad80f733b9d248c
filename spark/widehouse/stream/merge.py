"""Split the transform's tagged output and merge partial rows across input partitions, in Arrow.

The transform (:mod:`widehouse.stream.transform`) already collapses each input partition's events
per (key, hour); the same key and hour still appear once per partition that saw it. This module
merges those on the driver with the catalog's merge functions (sum; min; max; and for first/last
the smallest/largest (event time, value) pair), sorts the rows by (key, hour), and turns the side
rows into the quarantine and late tables' shape. Pure pyarrow: unit-tested without Spark.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from widehouse.catalog import WideTable
from widehouse.stream.transform import KIND_LATE, KIND_PARTIAL, KIND_QUARANTINE, KIND_STATS, TransformPlan


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
    return out.filter(pc.equal(out["wh_kind"], kind))


def partials(out: pa.Table, plan: TransformPlan, name: str) -> pa.Table:
    """Merged partial rows of one wide table: key, hour, then its columns; sorted by (key, hour)."""
    table = plan.catalog.table(name)
    prefix = plan.prefix(name)
    names = [table.key_name, "hour", *[c.name for c in table.columns]]
    rows = out.filter(pc.and_(pc.equal(out["wh_kind"], KIND_PARTIAL), pc.equal(out["wh_table"], name)))
    rows = rows.select([prefix + n for n in names]).rename_columns(names)
    return merge(rows, table)


def merge(rows: pa.Table, table: WideTable) -> pa.Table:
    """Merge partial rows per (key, hour) (any number of rows per key and hour)."""
    keys = [table.key_name, "hour"]
    if rows.num_rows == 0:
        return rows
    plain = [c for c in table.columns if not c.is_pair]
    grouped = rows.group_by(keys, use_threads=False).aggregate([(c.name, c.merge_function) for c in plain])
    grouped = grouped.rename_columns({f"{c.name}_{c.merge_function}": c.name for c in plain})
    pairs = [c for c in table.columns if c.is_pair]
    for column in pairs:  # joined as flat (ts, v) columns: Arrow joins do not carry structs
        grouped = grouped.join(_pairs(rows, keys, column.name, column.agg), keys=keys, join_type="left outer")
    for column in pairs:
        ts, v = grouped[f"{column.name}__ts"].combine_chunks(), grouped[f"{column.name}__v"].combine_chunks()
        struct = pa.StructArray.from_arrays(
            [ts, v], fields=list(rows.schema.field(column.name).type), mask=pc.is_null(ts)
        )
        grouped = grouped.append_column(column.name, struct)
    ordered = grouped.select([*keys, *[c.name for c in table.columns]])
    result = ordered.sort_by([(k, "ascending") for k in keys])
    return result.cast(rows.schema)


def _pairs(rows: pa.Table, keys: list[str], name: str, agg: str) -> pa.Table:
    """Per (key, hour), the smallest (first) or largest (last) non-null (ts, v) pair of ``name``, as
    flat columns ``<name>__ts`` and ``<name>__v``."""
    present = rows.filter(pc.is_valid(rows[name]))
    pair = present[name].combine_chunks() if present.num_rows else pa.array([], rows.schema.field(name).type)
    flat = pa.table(
        {
            **{k: present[k] for k in keys},
            "ts": pc.struct_field(pair, "ts"),
            "v": pc.struct_field(pair, "v"),
        }
    )
    order = "ascending" if agg == "first" else "descending"
    flat = flat.sort_by([*[(k, "ascending") for k in keys], ("ts", order), ("v", order)])
    best = flat.group_by(keys, use_threads=False).aggregate([("ts", "first"), ("v", "first")])
    return pa.table(
        {**{k: best[k] for k in keys}, f"{name}__ts": best["ts_first"], f"{name}__v": best["v_first"]}
    )


def side(out: pa.Table, kind: str, app: str, group: str, batch_id: int) -> pa.Table:
    """Quarantine or late rows in their tables' shape, sorted by (topic, message id)."""
    if kind not in (KIND_QUARANTINE, KIND_LATE):
        raise ValueError(kind)
    rows = _kind(out, kind).sort_by([("wh_topic", "ascending"), ("wh_message_id", "ascending")])
    n = rows.num_rows
    columns: dict[str, Any] = {
        "app": pa.array([app] * n, pa.string()),
        "group": pa.array([group] * n, pa.string()),
        "batch_id": pa.array([batch_id] * n, pa.int64()),
        "topic": rows["wh_topic"],
        "message_id": rows["wh_message_id"],
        "publish_time": rows["wh_publish_time"],
    }
    if kind == KIND_QUARANTINE:
        columns |= {"reason": rows["wh_reason"], "detail": rows["wh_detail"]}
    else:
        columns |= {"event_time": rows["wh_event_time"], "key": rows["wh_key"]}
    columns |= {"payload": rows["wh_payload"], "payload_bytes": rows["wh_payload_bytes"]}
    return pa.table(columns)


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

"""Fold an hour's late events into partial rows, for a re-finalization with ``--include-late``.

``late_events`` keeps each late message's payload (up to the stream's payload limit). Folding them
runs the stream's own transform with the event time standing in for the publish time, so the
lateness rule (and nothing else) is lifted: the same parse, filters and aggregates apply. A payload
the stream truncated cannot be folded; it is reported, not guessed.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from widehouse.contracts.periods import HOUR, as_hour, sql_time
from widehouse.contracts.tables import LATE

if TYPE_CHECKING:
    import pyarrow as pa

    from widehouse.catalog import Catalog
    from widehouse.clickhouse import ClickHouse
    from widehouse.stream.plan import TransformPlan


@dataclass(frozen=True)
class LatePartials:
    rows: pa.Table
    """Partial rows of the table (the ``<T>_partial`` shape) for the hour."""
    events: int
    """Late events of the hour's topics that were folded."""
    truncated: int
    """Late events whose stored payload was cut at the stream's limit (not folded)."""
    rejected: int
    """Late events the parser now rejects (e.g. the catalog changed since)."""


def late_partials(
    client: ClickHouse, catalog: Catalog, table: str, hour: dt.datetime, app: str
) -> LatePartials:
    """Partial rows of ``table`` for ``hour`` from the hour's late events (event time in the hour),
    whichever app stored them (``app`` is the caller's; late events of a replaced app count too)."""
    del app
    import pyarrow as pa
    import pyarrow.compute as pc

    from widehouse.stream import merge

    hour = as_hour(hour)
    topics = [str(t.name) for t in catalog.topics_for(table)]
    # one row per message: a replayed batch may have stored a late event twice
    stored = client.arrow(
        f"SELECT topic, message_id, any(event_time) AS late_event_time, any(payload) AS late_payload, "
        f"any(payload_bytes) AS late_payload_bytes FROM {LATE} "
        "WHERE topic IN {topics:Array(String)} AND event_time >= {a:DateTime64(3, 'UTC')} "
        "AND event_time < {b:DateTime64(3, 'UTC')} GROUP BY topic, message_id ORDER BY topic, message_id",
        {"topics": topics, "a": sql_time(hour), "b": sql_time(hour + HOUR)},
    )
    whole = pc.equal(pc.binary_length(stored["late_payload"]), stored["late_payload_bytes"].cast(pa.int32()))
    complete = stored.filter(whole)
    truncated = stored.num_rows - complete.num_rows
    plan = table_plan(catalog, table)
    out = fold_stored(
        plan, complete["topic"], complete["message_id"], complete["late_payload"], complete["late_event_time"]
    )
    rows = merge.partials(out, plan, table)
    folded = sum(s.good for s in merge.topic_stats(out).values())
    kinds = out["wh_kind"]
    rejected = int(pc.sum(pc.equal(kinds, "quarantine")).as_py() or 0)
    return LatePartials(rows, folded, truncated, rejected)


def table_plan(catalog: Catalog, table: str) -> TransformPlan:
    """The transform of one wide table's topics (partials of that table only)."""
    from widehouse.stream.plan import TransformPlan

    topics = [str(t.name) for t in catalog.topics_for(table)]
    return TransformPlan(catalog, (table,), TransformPlan.for_topics(catalog, topics).payload_limit)


def fold_stored(
    plan: TransformPlan, topics: Any, message_ids: Any, payloads: Any, publish_times: Any
) -> pa.Table:
    """The stream's transform over stored messages (columns of equal length: topic, message id,
    payload, the time standing in for the publish time): the tagged output of
    :func:`widehouse.stream.output.output_schema`."""
    import pyarrow as pa

    from widehouse.stream.output import output_schema
    from widehouse.stream.transform import transform

    def plain(column: Any, kind: pa.DataType) -> pa.Array:
        cast = column.cast(kind)
        return cast.combine_chunks() if isinstance(cast, pa.ChunkedArray) else cast

    batch = pa.RecordBatch.from_pydict(
        {
            "value": plain(payloads, pa.binary()),
            "__topic": plain(topics, pa.string()),
            "__messageId": plain(message_ids, pa.string()),
            "__publishTime": plain(publish_times, pa.timestamp("us", tz="UTC")),
        }
    )
    return pa.Table.from_batches(list(transform(iter([batch]), plan)), schema=output_schema(plan))

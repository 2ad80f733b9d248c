"""Fold an hour's late events into partial rows, for a re-finalization with ``--include-late``.

``late_events`` keeps each late message's payload (up to the stream's payload limit). Folding them
runs the stream's own transform with the event time standing in for the publish time, so the
lateness rule (and nothing else) is lifted: the same parse, filters and aggregates apply. A payload
the stream truncated cannot be folded; it is reported, not guessed.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING

from widehouse.contracts.periods import HOUR, as_hour, sql_time
from widehouse.contracts.tables import LATE

if TYPE_CHECKING:
    import pyarrow as pa

    from widehouse.catalog import Catalog
    from widehouse.clickhouse import ClickHouse


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
    from widehouse.stream.transform import TransformPlan, output_schema, transform

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
    plan = TransformPlan.for_topics(catalog, topics)
    plan = TransformPlan(catalog, (table,), plan.payload_limit)
    whole = pc.equal(pc.binary_length(stored["late_payload"]), stored["late_payload_bytes"].cast(pa.int32()))
    complete = stored.filter(whole)
    truncated = stored.num_rows - complete.num_rows
    batch = pa.RecordBatch.from_pydict(
        {
            "value": complete["late_payload"].cast(pa.binary()).combine_chunks(),
            "__topic": complete["topic"].cast(pa.string()).combine_chunks(),
            "__messageId": complete["message_id"].cast(pa.string()).combine_chunks(),
            "__publishTime": complete["late_event_time"].cast(pa.timestamp("us", tz="UTC")).combine_chunks(),
        }
    )
    out = pa.Table.from_batches(list(transform(iter([batch]), plan)), schema=output_schema(plan))
    rows = merge.partials(out, plan, table)
    folded = sum(s.good for s in merge.topic_stats(out).values())
    kinds = out["wh_kind"]
    rejected = int(pc.sum(pc.equal(kinds, "quarantine")).as_py() or 0)
    return LatePartials(rows, folded, truncated, rejected)

"""What a repair reads and records in ClickHouse: candidates, chunks, outcomes, hours to re-finalize.

Tables: ``quarantine`` (the stream's, read only), ``repairs`` and ``repair_chunks``
(:data:`widehouse.contracts.tables.REPAIR_SHAPES`). Reads that decide whether something is written
again are ``consistent=True`` (on a cluster both tables are quorum-written idempotency records).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from widehouse.contracts.periods import as_utc, sql_time
from widehouse.contracts.tables import (
    LEDGER,
    QUARANTINE,
    REPAIR_CHUNKS,
    REPAIR_CHUNKS_SHAPE,
    REPAIRED,
    REPAIRS,
    REPAIRS_SHAPE,
    STILL_INVALID,
)
from widehouse.stream.deadletter import OVERFLOW_PREFIX

if TYPE_CHECKING:
    import pyarrow as pa

    from widehouse.clickhouse import ClickHouse

_MESSAGE = (
    "toString(topic) AS q_topic, message_id AS q_id, any(publish_time) AS q_time, any(payload) AS q_payload, "
    "any(payload_bytes) AS q_bytes"
)
"""One stored message (aliases differ from the columns: WHERE and GROUP BY name the columns)."""
MESSAGE_COLUMNS = ["topic", "message_id", "publish_time", "payload", "payload_bytes"]
_DONE = f"chunk IN (SELECT chunk FROM {REPAIR_CHUNKS} WHERE `table` = {{t:String}})"


@dataclass(frozen=True)
class Selection:
    """Which quarantined messages a repair looks at: the table's topics (or some of them), a
    publish-time range ``[start, end)``, optionally only some of the stream's original reasons."""

    table: str
    topics: tuple[str, ...]
    start: dt.datetime
    end: dt.datetime
    reasons: tuple[str, ...] = ()


def candidates(
    client: ClickHouse, selection: Selection, after: tuple[str, str] | None, limit: int
) -> pa.Table:
    """The next ``limit`` quarantined messages of the selection not repaired for the table (nor
    claimed by a chunk), after ``after`` = (topic, message id), in (topic, message id) order: topic,
    message_id, publish_time, payload, payload_bytes. One row per message (a replayed batch may have
    stored it twice); the merge's overflow rows are partial sums, not messages, and never repaired."""
    where = [
        "topic IN {topics:Array(String)}",
        "publish_time >= {a:DateTime64(3, 'UTC')}",
        "publish_time < {b:DateTime64(3, 'UTC')}",
        f"NOT startsWith(message_id, '{OVERFLOW_PREFIX}')",
        f"(topic, message_id) NOT IN (SELECT topic, message_id FROM {REPAIRS} "
        f"WHERE `table` = {{t:String}} AND outcome = '{REPAIRED}')",
    ]
    parameters: dict[str, Any] = {
        "t": selection.table,
        "topics": list(selection.topics),
        "a": sql_time(selection.start),
        "b": sql_time(selection.end),
        "n": int(limit),
    }
    if selection.reasons:
        where.append("reason IN {reasons:Array(String)}")
        parameters["reasons"] = list(selection.reasons)
    if after is not None:
        where.append("(topic, message_id) > ({after_topic:String}, {after_id:String})")
        parameters.update(after_topic=after[0], after_id=after[1])
    # the page's keys first (small columns only), then the payloads of those keys: one query that
    # aggregated every payload of the range per page would read all of them again for each page
    keys = (
        f"SELECT topic, message_id FROM {QUARANTINE} WHERE {' AND '.join(where)} "
        "GROUP BY topic, message_id ORDER BY topic, message_id LIMIT {n:UInt64}"
    )
    return client.arrow(
        f"SELECT {_MESSAGE} FROM {QUARANTINE} WHERE {' AND '.join(where[:3])} "
        f"AND (topic, message_id) IN ({keys}) GROUP BY topic, message_id ORDER BY topic, message_id",
        parameters,
    ).rename_columns(MESSAGE_COLUMNS)


def chunk_messages(client: ClickHouse, table: str, chunk: int) -> pa.Table:
    """The messages a chunk claimed, with their stored payloads (the candidates' columns)."""
    return client.arrow(
        f"SELECT {_MESSAGE} "
        f"FROM {QUARANTINE} WHERE (topic, message_id) IN (SELECT topic, message_id FROM {REPAIRS} "
        "WHERE `table` = {t:String} AND chunk = {c:UInt64}) "
        f"AND NOT startsWith(message_id, '{OVERFLOW_PREFIX}') "
        "GROUP BY topic, message_id ORDER BY topic, message_id",
        {"t": table, "c": int(chunk)},
    ).rename_columns(MESSAGE_COLUMNS)


def pending_chunks(client: ClickHouse, table: str) -> list[int]:
    """Chunks of ``table`` claimed and not done (a repair cut short), oldest first."""
    rows = client.rows(
        f"SELECT DISTINCT chunk FROM {REPAIRS} WHERE `table` = {{t:String}} AND chunk > 0 "
        f"AND NOT {_DONE} ORDER BY chunk",
        {"t": table},
        consistent=True,
    )
    return [int(r[0]) for r in rows]


def last_chunk(client: ClickHouse, table: str) -> int:
    """The highest chunk number of ``table`` so far (0: none)."""
    value = client.scalar(
        f"SELECT max(chunk) FROM {REPAIRS} WHERE `table` = {{t:String}}", {"t": table}, consistent=True
    )
    return int(value or 0)


def last_outcomes(client: ClickHouse, table: str, keys: list[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """(topic, message id) -> ``reason|detail`` of its newest ``invalid`` outcome, for ``keys``.

    Asked by the keys' range (two bounds, not a page's worth of ids in the request), then narrowed
    to the keys here."""
    if not keys:
        return {}
    low, high = min(keys), max(keys)
    rows = client.rows(
        "SELECT toString(topic), message_id, argMax(concat(reason, '|', detail), at) "
        f"FROM {REPAIRS} WHERE `table` = {{t:String}} AND outcome = '{STILL_INVALID}' "
        "AND (topic, message_id) >= ({lt:String}, {lm:String}) "
        "AND (topic, message_id) <= ({ht:String}, {hm:String}) GROUP BY topic, message_id",
        {"t": table, "lt": low[0], "lm": low[1], "ht": high[0], "hm": high[1]},
        consistent=True,
    )
    wanted = set(keys)
    return {(str(t), str(m)): str(o) for t, m, o in rows if (str(t), str(m)) in wanted}


def server_now(client: ClickHouse) -> dt.datetime:
    """The ClickHouse server's clock (the ledger's too: ``finalized_at`` is server time)."""
    value = client.scalar("SELECT now64(3, 'UTC')")
    assert isinstance(value, dt.datetime)
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value


def record_outcomes(client: ClickHouse, rows: list[dict[str, Any]], token: str) -> None:
    if rows:
        client.insert(REPAIRS, _arrow(rows, REPAIRS_SHAPE), token)


def record_done(client: ClickHouse, rows: list[dict[str, Any]], token: str) -> None:
    client.insert(REPAIR_CHUNKS, _arrow(rows, REPAIR_CHUNKS_SHAPE), token)


def periods_to_republish(client: ClickHouse, table: str, grain: str) -> list[dt.datetime]:
    """Published periods (hours, or days for ``grain`` ``day``) of ``table`` that a repair folded
    events into after their newest publication."""
    period = "toDateTime64(toStartOfDay(hour, 'UTC'), 3, 'UTC')" if grain == "day" else "hour"
    rows = client.rows(
        f"SELECT r.period FROM (SELECT {period} AS period, max(done_at) AS repaired FROM {REPAIR_CHUNKS} "
        "WHERE `table` = {t:String} AND rows > 0 GROUP BY period) AS r "
        f"INNER JOIN (SELECT period, max(finalized_at) AS published FROM {LEDGER} "
        "WHERE `table` = {t:String} GROUP BY period) AS l ON r.period = l.period "
        "WHERE r.repaired > l.published ORDER BY r.period",
        {"t": table},
        consistent=True,
    )
    return [as_utc(r[0]) for r in rows]


def _arrow(rows: list[dict[str, Any]], shape: Any) -> pa.Table:
    import pyarrow as pa

    return pa.Table.from_pylist(rows, schema=shape.arrow_schema())


__all__ = [
    "Selection",
    "candidates",
    "chunk_messages",
    "last_chunk",
    "last_outcomes",
    "pending_chunks",
    "periods_to_republish",
    "record_done",
    "record_outcomes",
    "server_now",
]

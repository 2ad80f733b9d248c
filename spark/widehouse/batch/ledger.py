"""The ledger of published periods, the prepared publications and the reconciliation table
(ClickHouse; their names and shapes: :mod:`widehouse.contracts.tables`).

A period's final rows become visible to analysts when the publish step commits its ledger row:
the analyst view ``<T>`` shows the rows of ``<T>_final`` whose ``finalized_at`` is the newest
ledger entry of their period, and live merged rows for periods with no entry. Rows a crashed run
left behind carry a ``finalized_at`` no ledger row names, so nobody sees them; the next run
replaces them.

``publications`` holds the same row, written earlier: when a publication is *prepared* (its rows
staged in ``<T>_final``, invisible). From then on it is decided: a prepared publication newer than
the period's newest ledger row (:func:`pending`) is rolled forward by the next publisher of the
period before anything else (:func:`widehouse.batch.publish.recover`).

Every read here is ``consistent=True``: on a ClickHouse cluster the ledger and the publications are
quorum-written and read with sequential consistency (:mod:`widehouse.clickhouse.client`), so a read
that lands on a lagging replica fails (and is retried) instead of missing a publication, which
would let a period be published twice.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from widehouse.contracts.periods import HOUR, hours_of, sql_time
from widehouse.contracts.tables import BATCH_SHAPES, LEDGER, PUBLICATIONS

if TYPE_CHECKING:
    import pyarrow as pa

    from widehouse.clickhouse import ClickHouse
    from widehouse.shape import Shape


def ensure(client: ClickHouse) -> None:
    """Create the batch layer's tables (:data:`widehouse.contracts.tables.BATCH_SHAPES`)."""
    client.ensure_shapes(BATCH_SHAPES)


def record(client: ClickHouse, rows: list[dict[str, Any]], shape: Shape, token: str) -> None:
    import pyarrow as pa

    data: pa.Table = pa.Table.from_pylist(rows, schema=shape.arrow_schema())
    client.insert(shape.name, data, token)


def published(
    client: ClickHouse, table: str, first: dt.datetime, last: dt.datetime
) -> dict[dt.datetime, dt.datetime]:
    """Period -> newest ``finalized_at`` of the table's ledger rows with first <= period <= last."""
    rows = client.rows(
        f"SELECT period, max(finalized_at) FROM {LEDGER} WHERE `table` = {{t:String}} "
        "AND period >= {a:DateTime64(3, 'UTC')} AND period <= {b:DateTime64(3, 'UTC')} GROUP BY period",
        {"t": table, "a": sql_time(first), "b": sql_time(last)},
        consistent=True,
    )
    return {_utc(p): _utc(f) for p, f in rows}


def missing_hours(client: ClickHouse, table: str, day: dt.date) -> list[dt.datetime]:
    """Hours of ``day`` with no published final rows of ``table`` yet."""
    hours = hours_of(day)
    done = published(client, table, hours[0], hours[-1])
    return [h for h in hours if h not in done]


def last_entry(client: ClickHouse, table: str, period: dt.datetime) -> dict[str, Any] | None:
    """The newest ledger row of one period, or None."""
    result = client.query(
        f"SELECT * FROM {LEDGER} WHERE `table` = {{t:String}} AND period = {{p:DateTime64(3, 'UTC')}} "
        "ORDER BY finalized_at DESC LIMIT 1",
        {"t": table, "p": sql_time(period)},
        consistent=True,
    )
    rows = list(result.named_results())
    return dict(rows[0]) if rows else None


def pending(client: ClickHouse, table: str, period: dt.datetime) -> dict[str, Any] | None:
    """The newest prepared publication of one period that the ledger has not committed, or None."""
    where = "`table` = {t:String} AND period = {p:DateTime64(3, 'UTC')}"
    result = client.query(
        f"SELECT * FROM {PUBLICATIONS} WHERE {where} AND finalized_at > "
        f"(SELECT max(finalized_at) FROM {LEDGER} WHERE {where}) ORDER BY finalized_at DESC LIMIT 1",
        {"t": table, "p": sql_time(period)},
        consistent=True,
    )
    rows = list(result.named_results())
    if not rows:
        return None
    row = dict(rows[0])
    return {k: _utc(v) if isinstance(v, dt.datetime) else v for k, v in row.items()}


def next_version(client: ClickHouse, table: str, period: dt.datetime) -> dt.datetime:
    """``finalized_at`` for a new publication of the period: the ClickHouse server's now (one clock
    for every publisher), but always after every earlier publication of the period, committed or
    prepared (the Delta ``txnVersion`` must grow per period, whatever any clock says)."""
    where = "`table` = {t:String} AND period = {p:DateTime64(3, 'UTC')}"
    now, newest = client.rows(
        f"SELECT now64(3, 'UTC'), greatest((SELECT max(finalized_at) FROM {LEDGER} WHERE {where}), "
        f"(SELECT max(finalized_at) FROM {PUBLICATIONS} WHERE {where}))",
        {"t": table, "p": sql_time(period)},
        consistent=True,
    )[0]
    return max(_utc(now), _utc(newest) + dt.timedelta(milliseconds=1))


def _utc(value: dt.datetime) -> dt.datetime:
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


__all__ = [
    "HOUR",
    "ensure",
    "last_entry",
    "missing_hours",
    "next_version",
    "pending",
    "published",
    "record",
]

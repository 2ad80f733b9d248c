"""Publish a period's final rows to both stores: prepared, then committed in one decided order.

Two stores cannot commit in one transaction; what is one step here is the *decision*. Steps:

1. **Stage**: the rows go to ClickHouse ``<T>_final`` as a new version of the period, tagged with
   this publication's ``finalized_at``. Invisible: the analyst view shows only versions the ledger
   names. A crash here leaves garbage nobody sees (deleted by the next publish).
2. **Prepare** (the decision): the publication's ledger row goes to ``publications``. Nothing new
   is visible yet, and from now on the publication *will* become visible in both stores.
3. **Delta**: one commit replaces the period in ``silver/<T>`` (``replaceWhere``), keyed by Delta's
   ``txnAppId`` = (table, period) and ``txnVersion`` = ``finalized_at`` in ms: a replay is a
   no-op, and an older publication can never overwrite a newer one (a stale holder is fenced).
4. **Commit**: the ledger row goes to ``finalized_periods``, which flips the ClickHouse view.

:func:`recover` rolls a prepared publication forward (steps 3 and 4 again, from the staged rows;
both idempotent). Every publisher of a period calls it first, under the period's lease
(:mod:`.lease`) and before its gate or reconciliation may stop it, so a crash at any point is
healed by the next run whatever that run then decides. The stores disagree only between steps 3
and 4: one ClickHouse insert, or, after a crash exactly there, until the next run of the period.
Superseded versions are deleted afterwards (asynchronously; nobody sees them meanwhile).
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from widehouse.batch import ledger
from widehouse.catalog.schema import arrow_schema, final_columns
from widehouse.clickhouse.ddl import q, table_names
from widehouse.contracts.periods import day_start, sql_time
from widehouse.contracts.tables import LEDGER_SHAPE, PUBLICATION_SHAPE
from widehouse.errors import BatchError

if TYPE_CHECKING:
    from collections.abc import Callable

    import pyarrow as pa

    from widehouse.batch.lease import Lease
    from widehouse.catalog import WideTable
    from widehouse.clickhouse import ClickHouse

log = logging.getLogger(__name__)
FINALIZED_AT = "finalized_at"


@dataclass(frozen=True)
class RunInfo:
    """Who publishes and how (recorded in the ledger)."""

    run_id: str
    kind: str  # "hour" | "day"
    forced: bool = False
    include_late: bool = False
    late_rows: int = 0
    reconciliation: str = ""
    note: str = ""


class SilverWriter(Protocol):
    """Writes a period of ``silver/<T>`` (Spark: :class:`widehouse.batch.spark.DeltaSilver`)."""

    def replace(
        self, table: WideTable, period: dt.datetime | dt.date, rows: pa.Table, publication: int
    ) -> None:
        """Replace the period with ``rows`` in one commit, idempotent per ``publication`` (a
        version that only grows per (table, period): a replay or an older one changes nothing)."""
        ...


@dataclass(frozen=True)
class PublishResult:
    table: str
    period: dt.datetime
    rows: int
    finalized_at: dt.datetime


def final_schema(table: WideTable) -> pa.Schema:
    """Arrow schema of ``silver/<T>`` and ``<T>_final``: key, period, columns, offline, finalized_at."""
    import pyarrow as pa

    return arrow_schema(final_columns(table)).append(
        pa.field(FINALIZED_AT, pa.timestamp("us", tz="UTC"), False)
    )


def conform(rows: pa.Table, table: WideTable, finalized_at: dt.datetime) -> pa.Table:
    """``rows`` (key, period, some of the columns) in the final schema; missing columns null."""
    import pyarrow as pa

    schema = final_schema(table)
    n = rows.num_rows
    arrays = []
    for field in schema:
        if field.name == FINALIZED_AT:
            arrays.append(pa.array([finalized_at] * n, field.type))
        elif field.name in rows.column_names:
            arrays.append(_cast(rows[field.name], field.type))
        else:
            arrays.append(pa.nulls(n, field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def _cast(column: pa.ChunkedArray, target: pa.DataType) -> pa.ChunkedArray:
    """Cast, reading ClickHouse's integer ``DateTime`` (epoch seconds) and ``Date`` (epoch days)."""
    import pyarrow as pa

    if pa.types.is_integer(column.type):
        if pa.types.is_timestamp(target):
            return column.cast(pa.int64()).cast(pa.timestamp("s", tz="UTC")).cast(target)
        if pa.types.is_date32(target):
            return column.cast(pa.int32()).cast(pa.date32())
    return column.cast(target)


def _period_start(period: dt.datetime | dt.date) -> dt.datetime:
    if isinstance(period, dt.datetime):
        return period.astimezone(dt.UTC)
    return day_start(period)


def publish(  # noqa: PLR0917 - what, where and how, named at call sites
    client: ClickHouse,
    silver: SilverWriter,
    table: WideTable,
    period: dt.datetime | dt.date,
    rows: pa.Table,
    run: RunInfo,
    step: Callable[[str], None] | None = None,
    lease: Lease | None = None,
) -> PublishResult:
    """Publish ``rows`` as the final rows of ``table`` for ``period`` (an hour, or a day).

    The caller holds the period's ``lease`` and has called :func:`recover`. ``step`` is called with
    ``after-final``, ``after-prepare`` and ``after-silver`` (the crash tests kill there)."""
    step = step or (lambda _point: None)
    start = _period_start(period)
    finalized_at = ledger.next_version(client, table.name, start)  # ms, as ClickHouse keeps it
    data = conform(rows, table, finalized_at)
    final = table_names(table).final
    token = f"publish:{table.name}:{start.isoformat()}:{run.run_id}:{finalized_at.isoformat()}"
    client.insert(final, data, token)
    step("after-final")
    entry = {
        "table": table.name,
        "period": start,
        "finalized_at": finalized_at,
        "run_id": run.run_id,
        "kind": run.kind,
        "rows": data.num_rows,
        "forced": run.forced,
        "include_late": run.include_late,
        "late_rows": run.late_rows,
        "reconciliation": run.reconciliation,
        "note": run.note,
    }
    if lease is not None:
        lease.renew()  # still ours right before the decision (and good for another TTL)
    ledger.record(client, [entry], PUBLICATION_SHAPE, f"prepare:{_key(table, start, finalized_at)}")
    step("after-prepare")
    return _commit(client, silver, table, period, entry, data, step, lease)


def recover(
    client: ClickHouse,
    silver: SilverWriter,
    table: WideTable,
    period: dt.datetime | dt.date,
    step: Callable[[str], None] | None = None,
) -> PublishResult | None:
    """Roll the period's prepared, uncommitted publication forward (Delta, then the ledger, from the
    rows staged in ``<T>_final``); None when there is none. Call it under the period's lease."""
    start = _period_start(period)
    entry = ledger.pending(client, table.name, start)
    if entry is None:
        return None
    finalized_at = entry["finalized_at"]
    log.warning(
        "%s %s: rolling forward publication %s of run %s (prepared, not committed)",
        table.name,
        start.isoformat(),
        finalized_at.isoformat(),
        entry["run_id"],
    )
    staged = client.arrow(
        f"SELECT * EXCEPT ({FINALIZED_AT}) FROM {q(table_names(table).final)} FINAL "
        f"WHERE {q(table.period)} = {_period_sql(table)} AND {FINALIZED_AT} = {{f:DateTime64(3, 'UTC')}}",
        {"p": sql_time(start), "f": _ms(finalized_at)},
    )
    if staged.num_rows != entry["rows"]:
        raise BatchError(
            f"{table.name} {start.isoformat()}: prepared publication {finalized_at.isoformat()} of run "
            f"{entry['run_id']} has {staged.num_rows} staged row(s) in {table_names(table).final}, "
            f"its ledger row says {entry['rows']}; cannot roll it forward"
        )
    data = conform(staged, table, finalized_at)
    return _commit(client, silver, table, period, entry, data, step or (lambda _point: None), None)


def _commit(  # noqa: PLR0917 - one publication's parts
    client: ClickHouse,
    silver: SilverWriter,
    table: WideTable,
    period: dt.datetime | dt.date,
    entry: dict[str, Any],
    data: pa.Table,
    step: Callable[[str], None],
    lease: Lease | None,
) -> PublishResult:
    """Steps 3 and 4 of a prepared publication (both idempotent)."""
    start = _period_start(period)
    finalized_at: dt.datetime = entry["finalized_at"]
    if lease is not None:
        lease.check()
    try:
        silver.replace(table, period, data, publication_version(finalized_at))
    except Exception as exc:  # Spark/Delta errors are many kinds; the publication stays prepared
        raise BatchError(
            f"writing silver/{table.name} for {start.isoformat()} failed: {exc} (publication "
            f"{finalized_at.isoformat()} stays prepared; the next run of the period rolls it forward)"
        ) from exc
    step("after-silver")
    ledger.record(client, [entry], LEDGER_SHAPE, f"ledger:{_key(table, start, finalized_at)}")
    _drop_superseded(client, table, start, finalized_at)
    log.info(
        "published %s %s: %d rows (finalized_at %s)",
        table.name,
        start.isoformat(),
        data.num_rows,
        finalized_at,
    )
    return PublishResult(table.name, start, data.num_rows, finalized_at)


def publication_version(finalized_at: dt.datetime) -> int:
    """Delta ``txnVersion`` of a publication: its ``finalized_at`` in epoch milliseconds."""
    return int(finalized_at.timestamp() * 1000)


def _key(table: WideTable, start: dt.datetime, finalized_at: dt.datetime) -> str:
    return f"{table.name}:{start.isoformat()}:{finalized_at.isoformat()}"


def _ms(value: dt.datetime) -> str:
    return value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _period_sql(table: WideTable) -> str:
    return (
        "toDateTime({p:DateTime64(3, 'UTC')}, 'UTC')"
        if table.grain == "hour"
        else "toDate({p:DateTime64(3, 'UTC')})"
    )


def _drop_superseded(
    client: ClickHouse, table: WideTable, start: dt.datetime, finalized_at: dt.datetime
) -> None:
    """Delete older versions of the period from ``<T>_final`` (a background mutation)."""
    try:
        client.command(
            f"ALTER TABLE {q(table_names(table).final)} DELETE "
            f"WHERE {q(table.period)} = {_period_sql(table)} AND finalized_at < {{f:DateTime64(3, 'UTC')}}",
            {"p": sql_time(start), "f": _ms(finalized_at)},
        )
    except Exception as exc:  # housekeeping only: the ledger already hides old versions
        log.warning("could not delete superseded rows of %s %s: %s", table.name, start.isoformat(), exc)

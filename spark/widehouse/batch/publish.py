"""Publish a period's final rows to both stores, atomically per store, visible together.

Order: Delta ``silver/<T>`` first (one commit that replaces the period: ``replaceWhere``), then
ClickHouse ``<T>_final`` (a new version of the period's rows, tagged with this run's
``finalized_at``), then the ledger row that makes that version the visible one in the analyst view.
A crash before the ledger row leaves the old version visible in ClickHouse; a re-run publishes
again. Superseded versions are deleted afterwards (asynchronously; nobody sees them meanwhile).
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from widehouse.batch import ledger
from widehouse.batch.periods import day_start, sql_time
from widehouse.catalog.schema import arrow_schema, final_columns
from widehouse.clickhouse.ddl import q, table_names
from widehouse.errors import BatchError

if TYPE_CHECKING:
    from collections.abc import Callable

    import pyarrow as pa

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

    def replace(self, table: WideTable, period: dt.datetime | dt.date, rows: pa.Table) -> None: ...


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
) -> PublishResult:
    """Publish ``rows`` as the final rows of ``table`` for ``period`` (an hour, or a day).

    ``step`` is called with ``after-silver`` and ``after-final`` (the crash tests kill there)."""
    step = step or (lambda _point: None)
    start = _period_start(period)
    now = dt.datetime.now(dt.UTC)
    finalized_at = now.replace(microsecond=now.microsecond // 1000 * 1000)  # ClickHouse keeps ms
    data = conform(rows, table, finalized_at)
    try:
        silver.replace(table, period, data)
    except Exception as exc:  # Spark/Delta errors are many kinds; none may publish half
        raise BatchError(f"writing silver/{table.name} for {start.isoformat()} failed: {exc}") from exc
    step("after-silver")
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
    ledger.record(client, [entry], ledger.LEDGER_SHAPE, f"ledger:{token}")
    _drop_superseded(client, table, start, finalized_at)
    log.info(
        "published %s %s: %d rows (finalized_at %s)",
        table.name,
        start.isoformat(),
        data.num_rows,
        finalized_at,
    )
    return PublishResult(table.name, start, data.num_rows, finalized_at)


def _drop_superseded(
    client: ClickHouse, table: WideTable, start: dt.datetime, finalized_at: dt.datetime
) -> None:
    """Delete older versions of the period from ``<T>_final`` (a background mutation)."""
    period = (
        "toDateTime({p:DateTime64(3, 'UTC')}, 'UTC')"
        if table.grain == "hour"
        else "toDate({p:DateTime64(3, 'UTC')})"
    )
    try:
        client.command(
            f"ALTER TABLE {q(table_names(table).final)} DELETE WHERE {q(table.period)} = {period} "
            "AND finalized_at < {f:DateTime64(3, 'UTC')}",
            {"p": sql_time(start), "f": finalized_at.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]},
        )
    except Exception as exc:  # housekeeping only: the ledger already hides old versions
        log.warning("could not delete superseded rows of %s %s: %s", table.name, start.isoformat(), exc)

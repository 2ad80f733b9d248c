"""Publish a period's final rows to both stores: prepared, then committed in one decided order.

Two stores cannot commit in one transaction; what is one step here is the *decision*. Steps:

1. **Stage**: the rows go to ClickHouse ``<T>_final`` as a new version of the period, tagged with
   this publication's ``finalized_at``: computed inside ClickHouse by an ``INSERT ... SELECT``
   (:class:`FinalSelect`, the hourly finalize: nothing passes through Python), or inserted from
   Arrow (the daily merge's rows, extracted from HBase). Invisible: the analyst view shows only
   versions the ledger names. A crash here leaves garbage nobody sees (deleted by the next publish).
2. **Prepare** (the decision): the publication's ledger row goes to ``publications``. Nothing new
   is visible yet, and from now on the publication *will* become visible in both stores.
3. **Delta**: one commit replaces the period in ``silver/<T>`` (``replaceWhere``), keyed by Delta's
   ``txnAppId`` = (table, period) and ``txnVersion`` = ``finalized_at`` in ms: a replay is a
   no-op, and an older publication can never overwrite a newer one (a stale holder is fenced).
   The rows are read back from the staged version in ``<T>_final`` in pages of
   :data:`PAGE_ROWS` (keyset pagination on the key) and streamed to the writer
   (:mod:`widehouse.batch.silver`, delta-rs): both stores hold the very rows staged, and the
   Python process holds one page at a time whatever the number of rows.
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
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from widehouse.batch import ledger
from widehouse.catalog.schema import arrow_schema, final_columns
from widehouse.clickhouse.ddl import key_type, q, table_names
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
PAGE_ROWS = 100_000
"""Rows per page read back from ``<T>_final`` for the Delta commit (bounds the Python process)."""


@dataclass(frozen=True)
class FinalSelect:
    """A period's final rows as a ClickHouse ``SELECT`` (key, period, stream columns, in any order),
    staged by an ``INSERT ... SELECT`` that runs inside ClickHouse."""

    sql: str
    parameters: Mapping[str, Any] = field(default_factory=dict)


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
    airflow_run: str = ""
    """The Airflow DAG run that ran the job, ``<dag id>/<run id>``; '' when no Airflow task did."""


class SilverWriter(Protocol):
    """Writes a period of ``silver/<T>`` (delta-rs, registered in Spark's catalog:
    :class:`widehouse.batch.spark.DeltaSilver`)."""

    def replace(
        self, table: WideTable, period: dt.datetime | dt.date, rows: pa.RecordBatchReader, publication: int
    ) -> Any:
        """Replace the period with ``rows`` (streamed, :func:`final_schema`) in one commit,
        idempotent per ``publication`` (a version that only grows per (table, period): a replay or
        an older one changes nothing)."""
        ...


@dataclass(frozen=True)
class PublishResult:
    table: str
    period: dt.datetime
    rows: int
    finalized_at: dt.datetime
    seconds: dict[str, float] = field(default_factory=dict)
    """Wall time per step: ``stage`` (ClickHouse ``<T>_final``), ``prepare``, ``silver`` (the staged
    rows read back and committed to Delta), ``ledger``."""


def final_schema(table: WideTable) -> pa.Schema:
    """Arrow schema of ``silver/<T>`` and ``<T>_final``: key, period, columns, offline, finalized_at."""
    import pyarrow as pa

    return arrow_schema(final_columns(table)).append(
        pa.field(FINALIZED_AT, pa.timestamp("us", tz="UTC"), False)
    )


def conform(rows: pa.Table, table: WideTable, finalized_at: dt.datetime) -> pa.Table:
    """``rows`` (key, period, some of the columns) in the final schema; missing columns null
    (counts 0)."""
    import pyarrow as pa

    schema = final_schema(table)
    n = rows.num_rows
    arrays = []
    for column in schema:
        if column.name == FINALIZED_AT:
            arrays.append(pa.repeat(pa.scalar(finalized_at, column.type), n))
        elif column.name in rows.column_names:
            arrays.append(_cast(rows[column.name], column.type))
        elif not column.nullable and pa.types.is_integer(column.type):  # a count: 0, never null
            arrays.append(pa.repeat(pa.scalar(0, column.type), n))
        else:
            arrays.append(pa.nulls(n, column.type))
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
    rows: pa.Table | pa.RecordBatchReader | FinalSelect,
    run: RunInfo,
    step: Callable[[str], None] | None = None,
    lease: Lease | None = None,
) -> PublishResult:
    """Publish ``rows`` as the final rows of ``table`` for ``period`` (an hour, or a day): Arrow
    rows (a table, or a stream of record batches staged batch by batch), or a
    :class:`FinalSelect` ClickHouse runs into ``<T>_final`` itself.

    The caller holds the period's ``lease`` and has called :func:`recover`. ``step`` is called with
    ``after-final``, ``after-prepare`` and ``after-silver`` (the crash tests kill there)."""
    step = step or (lambda _point: None)
    started = time.perf_counter()
    start = _period_start(period)
    finalized_at = ledger.next_version(client, table.name, start)  # ms, as ClickHouse keeps it
    staged = _stage(client, table, start, finalized_at, rows, run.run_id)
    seconds = {"stage": time.perf_counter() - started}
    step("after-final")
    entry = {
        "table": table.name,
        "period": start,
        "finalized_at": finalized_at,
        "run_id": run.run_id,
        "kind": run.kind,
        "rows": staged,
        "forced": run.forced,
        "include_late": run.include_late,
        "late_rows": run.late_rows,
        "reconciliation": run.reconciliation,
        "note": run.note,
        "airflow_run": run.airflow_run,
    }
    if lease is not None:
        lease.renew()  # still ours right before the decision (and good for another TTL)
    ledger.record(client, [entry], PUBLICATION_SHAPE, f"prepare:{_key(table, start, finalized_at)}")
    seconds["prepare"] = time.perf_counter() - started - seconds["stage"]
    step("after-prepare")
    return _commit(client, silver, table, period, entry, step, lease, seconds)


def _stage(  # noqa: PLR0917 - one publication's parts
    client: ClickHouse,
    table: WideTable,
    start: dt.datetime,
    finalized_at: dt.datetime,
    rows: pa.Table | pa.RecordBatchReader | FinalSelect,
    run_id: str,
) -> int:
    """Step 1: the rows into ``<T>_final`` as version ``finalized_at``; returns how many."""
    import pyarrow as pa

    final = table_names(table).final
    if isinstance(rows, FinalSelect):
        names = ", ".join(q(c) for c in [table.key_name, table.period, *(c.name for c in table.columns)])
        client.command(
            f"INSERT INTO {q(final)} ({names}, {FINALIZED_AT})\n"
            f"SELECT {names}, toDateTime64({{wh_finalized_at:String}}, 3, 'UTC') FROM (\n{rows.sql}\n)",
            {**rows.parameters, "wh_finalized_at": _ms(finalized_at)},
        )
        return staged_rows(client, table, start, finalized_at)
    token = f"publish:{table.name}:{start.isoformat()}:{run_id}:{finalized_at.isoformat()}"
    if isinstance(rows, pa.RecordBatchReader):  # streamed: one insert per batch, memory flat
        staged = 0
        for index, batch in enumerate(rows):
            staged += client.insert(
                final, conform(pa.Table.from_batches([batch]), table, finalized_at), f"{token}:{index}"
            )
        return staged
    data = conform(rows, table, finalized_at)
    client.insert(final, data, token)
    return int(data.num_rows)


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
    staged = staged_rows(client, table, start, finalized_at)
    if staged != entry["rows"]:
        raise BatchError(
            f"{table.name} {start.isoformat()}: prepared publication {finalized_at.isoformat()} of run "
            f"{entry['run_id']} has {staged} staged row(s) in {table_names(table).final}, "
            f"its ledger row says {entry['rows']}; cannot roll it forward"
        )
    return _commit(client, silver, table, period, entry, step or (lambda _point: None), None)


def _staged_where(table: WideTable) -> str:
    return f"{q(table.period)} = {_period_sql(table)} AND {FINALIZED_AT} = {{f:DateTime64(3, 'UTC')}}"


def staged_rows(client: ClickHouse, table: WideTable, start: dt.datetime, finalized_at: dt.datetime) -> int:
    """Rows of publication ``finalized_at`` of the period staged in ``<T>_final``."""
    return int(
        client.scalar(
            f"SELECT count() FROM {q(table_names(table).final)} FINAL WHERE {_staged_where(table)}",
            {"p": sql_time(start), "f": _ms(finalized_at)},
        )
    )


def staged_batches(
    client: ClickHouse,
    table: WideTable,
    start: dt.datetime,
    finalized_at: dt.datetime,
    page_rows: int = PAGE_ROWS,
) -> pa.RecordBatchReader:
    """Publication ``finalized_at`` of the period as staged in ``<T>_final``, in the final schema,
    read lazily in pages of ``page_rows`` ordered by key (each page starts after the last key of the
    one before: the sort key's index finds it, and no row is read twice)."""
    import pyarrow as pa

    key = q(table.key_name)
    base = (
        f"SELECT * EXCEPT ({FINALIZED_AT}) FROM {q(table_names(table).final)} FINAL "
        f"WHERE {_staged_where(table)}"
    )
    parameters: dict[str, Any] = {"p": sql_time(start), "f": _ms(finalized_at)}

    def pages() -> Iterator[pa.RecordBatch]:
        after = ""
        while True:
            page = client.arrow(f"{base}{after} ORDER BY {key} LIMIT {int(page_rows)}", parameters)
            if page.num_rows:
                yield from conform(page, table, finalized_at).to_batches()
            if page.num_rows < page_rows:
                return
            parameters["last"] = page[table.key_name][-1].as_py()
            after = f" AND {key} > {{last:{key_type(table)}}}"

    return pa.RecordBatchReader.from_batches(final_schema(table), pages())


def _commit(  # noqa: PLR0917 - one publication's parts
    client: ClickHouse,
    silver: SilverWriter,
    table: WideTable,
    period: dt.datetime | dt.date,
    entry: dict[str, Any],
    step: Callable[[str], None],
    lease: Lease | None,
    seconds: dict[str, float] | None = None,
) -> PublishResult:
    """Steps 3 and 4 of a prepared publication (both idempotent), from the rows it staged."""
    seconds = dict(seconds or {})
    started = time.perf_counter()
    start = _period_start(period)
    finalized_at: dt.datetime = entry["finalized_at"]
    rows: int = entry["rows"]
    if lease is not None:
        lease.check()
    try:
        batches = staged_batches(client, table, start, finalized_at, PAGE_ROWS)
        silver.replace(table, period, batches, publication_version(finalized_at))
    except Exception as exc:  # Delta/ClickHouse errors are many kinds; the publication stays prepared
        raise BatchError(
            f"writing silver/{table.name} for {start.isoformat()} failed: {exc} (publication "
            f"{finalized_at.isoformat()} stays prepared; the next run of the period rolls it forward)"
        ) from exc
    seconds["silver"] = time.perf_counter() - started
    step("after-silver")
    ledger.record(client, [entry], LEDGER_SHAPE, f"ledger:{_key(table, start, finalized_at)}")
    _drop_superseded(client, table, start, finalized_at)
    log.info(
        "published %s %s: %d rows (finalized_at %s)",
        table.name,
        start.isoformat(),
        rows,
        finalized_at,
    )
    seconds["ledger"] = time.perf_counter() - started - seconds["silver"]
    return PublishResult(table.name, start, rows, finalized_at, {k: round(v, 2) for k, v in seconds.items()})


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

"""The silver Delta writer: one period of ``silver/<T>`` replaced in one delta-rs commit (no Spark).

Silver tables have one writer engine, the batch jobs through delta-rs (as the stream's bronze
tables are written, :mod:`widehouse.stream.bronze`); Spark only registers and reads them
(:mod:`widehouse.batch.spark`). A publication arrives as a stream of Arrow record batches and is
written as it comes (``write_deltalake`` consumes a ``RecordBatchReader``), so the Python process
holds one batch at a time whatever the number of rows.

Idempotency, as Delta's ``txnAppId``/``txnVersion`` gave it under Spark: the commit carries a
delta-rs ``Transaction(app_id, version)`` (``app_id`` = :func:`txn_app_id` (table, period),
``version`` = the publication). delta-rs records it but never skips by it, so the writer reads the
recorded version first and skips a publication that is not above it: a rolled-forward publication
is not written twice, and an older one never replaces a newer one. The period's lease (one
publisher at a time) makes that read-then-commit safe; a concurrent commit that still slips in
fails with ``CommitFailedError`` and the version is read again.

The commit is ``mode="overwrite"`` with a ``predicate`` on the period (Delta's ``replaceWhere``):
files of other periods are untouched, rows outside the period are refused, and columns the catalog
gained are added (``schema_mode="merge"``). Tables Spark created before are protocol 1/2 and are
written as they are.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from widehouse.contracts.periods import day_start
from widehouse.errors import BatchError

if TYPE_CHECKING:
    from collections.abc import Iterator

    import pyarrow as pa

    from widehouse.catalog import WideTable
    from widehouse.settings import DeltaSettings

log = logging.getLogger(__name__)
PARTITION = "wh_date"
"""The silver tables' partition column: the period's UTC date."""


def silver_path(delta: DeltaSettings, table: str) -> str:
    return delta.path("silver", table)


def txn_app_id(table: str, start: dt.datetime) -> str:
    """Delta ``txnAppId`` of a period's publications (one per (table, period))."""
    return f"widehouse-publish:{table}:{start.astimezone(dt.UTC):%Y-%m-%dT%H:%M}Z"


def period_predicate(table: WideTable, period: dt.datetime | dt.date) -> str:
    """The delta-rs predicate (SQL) selecting one period: its partition, then the period column."""
    if isinstance(period, dt.datetime):
        start = period.astimezone(dt.UTC)
        day = start.date()
        value = f"'{start:%Y-%m-%dT%H:%M:%S}Z'"
    else:
        day = period
        value = f"'{period.isoformat()}'"
    column = table.period.replace('"', "")
    return f"{PARTITION} = '{day.isoformat()}' AND \"{column}\" = {value}"


@dataclass(frozen=True)
class SilverCommit:
    """What :meth:`DeltaRsSilver.replace` did."""

    path: str
    rows: int
    written: bool
    """False: the table already held this publication or a newer one (nothing written)."""
    created: bool
    """The commit created the table (a new location: the Spark catalog entry needs (re)pointing)."""


class DeltaRsSilver:
    """Replaces one period of ``silver/<T>`` in a single delta-rs commit (see the module docstring).

    Holds only plain config (the Delta root and its storage options)."""

    def __init__(self, delta: DeltaSettings, storage_options: dict[str, str] | None = None) -> None:
        self.delta = delta
        self.storage_options = storage_options

    def recorded(self, table: str, start: dt.datetime) -> int | None:
        """The newest publication the table recorded for the period (None: none, or no table)."""
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        try:
            delta = DeltaTable(silver_path(self.delta, table), storage_options=self.storage_options)
        except TableNotFoundError:
            return None
        return delta.transaction_version(txn_app_id(table, start))

    def replace(
        self,
        table: WideTable,
        period: dt.datetime | dt.date,
        rows: pa.RecordBatchReader,
        publication: int,
    ) -> SilverCommit:
        """Replace the period with ``rows`` (the final schema, without :data:`PARTITION`) in one
        commit, unless publication ``publication`` or a newer one is already there."""
        from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
        from deltalake.exceptions import CommitFailedError, TableNotFoundError

        start = period.astimezone(dt.UTC) if isinstance(period, dt.datetime) else day_start(period)
        path = silver_path(self.delta, table.name)
        app_id = txn_app_id(table.name, start)
        try:
            existing: DeltaTable | None = DeltaTable(path, storage_options=self.storage_options)
        except TableNotFoundError:
            existing = None
        recorded = existing.transaction_version(app_id) if existing is not None else None
        if recorded is not None and recorded >= publication:
            log.info(
                "silver/%s %s: publication %d already committed (%d); skipped",
                table.name,
                start.isoformat(),
                publication,
                recorded,
            )
            return SilverCommit(path, 0, written=False, created=False)
        counted = _Counted(rows, period)
        try:
            write_deltalake(
                existing if existing is not None else path,
                counted.reader(),
                mode="overwrite",
                predicate=period_predicate(table, period),
                partition_by=[PARTITION],
                schema_mode="merge",  # columns the catalog gained
                storage_options=None if existing is not None else self.storage_options,
                commit_properties=CommitProperties(app_transactions=[Transaction(app_id, publication)]),
            )
        except CommitFailedError as exc:
            again = self.recorded(table.name, start)
            if again is not None and again >= publication:  # another holder of the app id won
                log.warning("silver/%s: publication %d committed concurrently", table.name, publication)
                return SilverCommit(path, 0, written=False, created=False)
            raise BatchError(f"delta commit to {path} (app id {app_id}) failed: {str(exc)[:500]}") from exc
        log.info(
            "silver/%s: %s holds publication %d (%d rows; a replay is skipped)",
            table.name,
            start.isoformat(),
            publication,
            counted.rows,
        )
        return SilverCommit(path, counted.rows, written=True, created=existing is None)


class _Counted:
    """Adds the partition column to each batch and counts the rows as delta-rs consumes them."""

    def __init__(self, source: pa.RecordBatchReader, period: dt.datetime | dt.date) -> None:
        self.source = source
        self.day = period.astimezone(dt.UTC).date() if isinstance(period, dt.datetime) else period
        self.rows = 0

    def reader(self) -> pa.RecordBatchReader:
        import pyarrow as pa

        schema = self.source.schema.append(pa.field(PARTITION, pa.date32()))  # nullable, as Spark wrote it

        day = pa.scalar(self.day, pa.date32())

        def batches() -> Iterator[pa.RecordBatch]:
            for batch in self.source:
                self.rows += batch.num_rows
                dates = pa.repeat(day, batch.num_rows)
                yield pa.RecordBatch.from_arrays([*batch.columns, dates], schema=schema)

        return pa.RecordBatchReader.from_batches(schema, batches())


__all__ = ["PARTITION", "DeltaRsSilver", "SilverCommit", "period_predicate", "silver_path", "txn_app_id"]

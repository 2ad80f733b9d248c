"""The stream's bronze Delta tables, written from the driver with delta-rs (``deltalake``): no Spark job.

A micro-batch's merged partial rows, quarantine, late and progress rows are already Arrow on the
driver, so each bronze table gets one delta-rs append per batch (~0.1 s) instead of a delta-spark
write with ``txnAppId`` (~1.2-1.5 s, mostly rebuilding the snapshot state to look the app id up).

**One writer engine per table.** The bronze tables (``bronze/<table>_partials``, ``bronze/quarantine``,
``bronze/late_events``, ``bronze/stream_progress``) are created and appended to only by this module;
delta-rs also writes their checkpoints (every ``delta.checkpointInterval`` commits, 100 by default).
Silver tables stay Spark's. Any Delta reader (Spark + delta-spark, delta-rs) reads both. New tables
are created with protocol 1/2 (reader 1, writer 2: NOT NULL invariants, no table features), which
is also what delta-spark 4.4 creates, so tables created by earlier versions stay appendable.

**Idempotency.** Every append carries the application transaction ``(<app>:<group>:<table>, batch)``.
delta-rs records it but never skips a replay by itself (a lower version would even move the recorded
one backwards), so :meth:`BronzeWriter.append` skips when the table's recorded version for the app
id is already >= the batch; a concurrent commit with the same app id fails with ``CommitFailedError``,
after which the version is read again and the append skipped if it is now there.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from widehouse.catalog import Catalog, WideTable
from widehouse.contracts.tables import SIDE_SHAPES
from widehouse.errors import DeltaError
from widehouse.settings import DeltaSettings
from widehouse.shape import Shape
from widehouse.stream.output import ARROW_VALUE_TYPES, TIMESTAMP, value_arrow_type
from widehouse.stream.tables import delta_partials, delta_side

if TYPE_CHECKING:
    from deltalake import DeltaTable

log = logging.getLogger("widehouse.stream.delta")

PARTIAL_PARTITIONS = ("wh_date", "wh_hour")
PARTIAL_INDEXED_COLUMNS = 2
"""Delta keeps min/max statistics of the first N columns; for these append-only tables only the
leading key / time columns are worth it (all 60+ columns cost time on every commit)."""
MAX_WRITER_VERSION = 2
"""The highest Delta writer protocol this writer appends to without looking at table features."""
SUPPORTED_FEATURES = frozenset({"appendOnly", "invariants", "checkConstraints", "timestampNtz"})
"""Writer features (protocol 7) an append by this writer honours."""


@dataclass(frozen=True)
class BronzeTable:
    """One bronze table: where it lives, its Arrow schema (as Spark reads it) and its partitions."""

    name: str
    path: str
    schema: pa.Schema
    partition_by: tuple[str, ...]
    indexed: int
    properties: tuple[tuple[str, str], ...] = ()
    """Table properties this writer keeps set (:func:`retention_properties`)."""


def retention_properties(delta: DeltaSettings) -> tuple[tuple[str, str], ...]:
    """How long a bronze table keeps its commits and rewritten files: delta-rs drops older commit
    files as it checkpoints, and the upkeep's vacuum older rewritten files (see stream.upkeep)."""
    interval = f"interval {delta.bronze_retention_seconds} seconds"
    return (("delta.logRetentionDuration", interval), ("delta.deletedFileRetentionDuration", interval))


def partial_arrow_schema(table: WideTable) -> pa.Schema:
    """``bronze/<table>_partials``: key, hour, the partial columns, then ``wh_group``, ``wh_batch_id``
    and the partition columns ``wh_date``, ``wh_hour`` (the Delta schema delta-spark created)."""
    fields = [
        pa.field(table.key_name, ARROW_VALUE_TYPES[table.key_type], nullable=False),
        pa.field("hour", TIMESTAMP, nullable=False),
    ]
    fields += [
        pa.field(c.name, value_arrow_type(c.agg, c.value_type), nullable=c.agg != "count")
        for c in table.columns
    ]
    fields += [
        pa.field("wh_group", pa.string()),
        pa.field("wh_batch_id", pa.int64()),
        pa.field("wh_date", pa.date32()),
        pa.field("wh_hour", pa.int32()),
    ]
    return pa.schema(fields)


def side_arrow_schema(shape: Shape) -> pa.Schema:
    """A side table: its declared shape plus the ``wh_date`` partition column."""
    return shape.arrow_schema().append(pa.field(Shape.DELTA_PARTITION, pa.date32()))


def bronze_tables(catalog: Catalog, delta: DeltaSettings, tables: tuple[str, ...]) -> dict[str, BronzeTable]:
    """The bronze tables a group writes, by name: the partials of ``tables`` and the side tables."""
    properties = retention_properties(delta)
    out = {
        name: BronzeTable(
            name,
            delta_partials(delta, name),
            partial_arrow_schema(catalog.table(name)),
            PARTIAL_PARTITIONS,
            PARTIAL_INDEXED_COLUMNS,
            properties,
        )
        for name in tables
    }
    for shape in SIDE_SHAPES.values():
        out[shape.name] = BronzeTable(
            shape.name,
            delta_side(delta, shape.name),
            side_arrow_schema(shape),
            (Shape.DELTA_PARTITION,),
            shape.delta_indexed,
            properties,
        )
    return out


def local_uri(path: str) -> str:
    """delta-rs' name of a table path: ``file:`` URIs become plain paths, ``s3a://`` is ``s3://``."""
    if path.startswith("file://"):
        return path[len("file://") :]
    if path.startswith("file:"):
        return path[len("file:") :]
    if path.startswith("s3a://"):
        return "s3://" + path[len("s3a://") :]
    return path


def with_partials_meta(data: pa.Table, group: str, batch_id: int) -> pa.Table:
    """Merged partial rows plus ``wh_group``, ``wh_batch_id`` and their hour's date and hour."""
    n = data.num_rows
    hour = data["hour"]
    return (
        data.append_column("wh_group", pa.array([group] * n, pa.string()))
        .append_column("wh_batch_id", pa.array([batch_id] * n, pa.int64()))
        .append_column("wh_date", pc.cast(hour, pa.date32()))
        .append_column("wh_hour", pc.hour(hour).cast(pa.int32()))
    )


def with_date(data: pa.Table, column: str) -> pa.Table:
    """Side rows plus ``wh_date``, the UTC date of ``column``."""
    return data.append_column(Shape.DELTA_PARTITION, pc.cast(data[column], pa.date32()))


def conform(data: pa.Table, schema: pa.Schema) -> tuple[pa.Table, bool]:
    """``data`` with the columns of ``schema`` in order and cast to its types (missing ones null),
    followed by any column the table does not have yet; and whether there were such new columns."""
    present = set(data.column_names)
    arrays = [
        data[f.name].cast(f.type) if f.name in present else pa.nulls(data.num_rows, f.type) for f in schema
    ]
    names = [f.name for f in schema]
    extra = [name for name in data.column_names if name not in set(names)]
    fields = [pa.field(f.name, f.type, nullable=True) for f in schema]
    fields += [pa.field(name, data[name].type) for name in extra]
    arrays += [data[name] for name in extra]
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields)), bool(extra)


class BronzeWriter:
    """Creates the bronze tables and appends to them, idempotently per (app id, batch).

    Keeps one :class:`deltalake.DeltaTable` per path, brought up to date before each append. Safe to
    share between the groups of an app: appends to one table are serialised by a lock per table
    (different tables commit in parallel; delta-rs releases the GIL while it writes).
    """

    def __init__(self, storage_options: dict[str, str] | None = None) -> None:
        self.storage_options = storage_options
        self._tables: dict[str, DeltaTable] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def _lock(self, path: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(path, threading.Lock())

    def ensure(self, table: BronzeTable) -> None:
        """Create ``table`` if missing (protocol 1/2, statistics on its leading columns); check an
        existing one is a Delta table this writer can append to, and set its properties where they
        differ (a table from before them, or a changed retention)."""
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        uri = local_uri(table.path)
        with self._lock(uri):
            try:
                existing = DeltaTable(uri, storage_options=self.storage_options)
            except TableNotFoundError:
                existing = None
            if existing is None:
                created = DeltaTable.create(
                    uri,
                    table.schema,
                    mode="ignore",  # another group or app created it meanwhile: fine
                    partition_by=list(table.partition_by),
                    configuration={
                        "delta.dataSkippingNumIndexedCols": str(table.indexed),
                        **dict(table.properties),
                    },
                    storage_options=self.storage_options,
                )
                self._tables[uri] = created
                return
            protocol = existing.protocol()
            features = set(protocol.writer_features or [])
            if protocol.min_writer_version > MAX_WRITER_VERSION and not features <= SUPPORTED_FEATURES:
                raise DeltaError(
                    f"bronze table {uri} needs Delta writer version {protocol.min_writer_version} "
                    f"with features {sorted(features - SUPPORTED_FEATURES)}, which the stream's "
                    f"delta-rs writer does not append with; recreate it (protocol 1/2) or drop the features"
                )
            partitions = tuple(existing.metadata().partition_columns)
            if partitions != table.partition_by:
                raise DeltaError(
                    f"bronze table {uri} is partitioned by {list(partitions)}, expected "
                    f"{list(table.partition_by)}; it was not created by the stream"
                )
            self._tables[uri] = self._with_properties(existing, uri, dict(table.properties))

    def _with_properties(self, existing: DeltaTable, uri: str, properties: dict[str, str]) -> DeltaTable:
        """``existing`` with ``properties`` set (one metadata commit where any differs). A commit that
        loses to another writer is looked at again: set by another app meanwhile is fine; otherwise
        the table keeps its old values, which costs speed, not rows, so it is logged, not raised."""
        from deltalake.exceptions import CommitFailedError

        def already_set() -> bool:
            current = existing.metadata().configuration
            return all(current.get(k) == v for k, v in properties.items())

        if already_set():
            return existing
        try:
            existing.alter.set_table_properties(properties)
        except CommitFailedError as exc:
            existing.update_incremental()
            if not already_set():
                log.warning("delta %s: properties %s not set: %s", uri, properties, str(exc)[:300])
        return existing

    def _table(self, uri: str) -> DeltaTable:
        from deltalake import DeltaTable

        table = self._tables.get(uri)
        if table is None:
            table = self._tables[uri] = DeltaTable(uri, storage_options=self.storage_options)
        else:
            table.update_incremental()
        return table

    def version(self, path: str, app_id: str) -> int | None:
        """The last batch recorded for ``app_id`` in the table at ``path`` (None: none)."""
        from deltalake.exceptions import TableNotFoundError

        uri = local_uri(path)
        with self._lock(uri):
            try:
                return self._table(uri).transaction_version(app_id)
            except TableNotFoundError:
                return None

    def append(self, table: BronzeTable, data: pa.Table, app_id: str, batch_id: int) -> bool:
        """Append ``data`` as batch ``batch_id`` of ``app_id``; False when that batch is already in
        the table (a replay), True when written."""
        from deltalake import CommitProperties, Transaction, write_deltalake
        from deltalake.exceptions import CommitFailedError

        uri = local_uri(table.path)
        with self._lock(uri):
            delta = self._table(uri)
            recorded = delta.transaction_version(app_id)
            if recorded is not None and recorded >= batch_id:
                log.info(
                    "delta %s: batch %d of %s already committed (%d); skipped",
                    uri,
                    batch_id,
                    app_id,
                    recorded,
                )
                return False
            conformed, new_columns = conform(data, pa.schema(delta.schema().to_arrow()))
            try:
                write_deltalake(
                    delta,
                    conformed,
                    mode="append",
                    partition_by=list(table.partition_by),
                    schema_mode="merge" if new_columns else None,
                    commit_properties=CommitProperties(app_transactions=[Transaction(app_id, batch_id)]),
                )
            except CommitFailedError as exc:
                delta.update_incremental()
                recorded = delta.transaction_version(app_id)
                if recorded is not None and recorded >= batch_id:  # another writer of this app id won
                    log.warning(
                        "delta %s: batch %d of %s committed concurrently; skipped", uri, batch_id, app_id
                    )
                    return False
                raise DeltaError(
                    f"delta append to {uri} (app id {app_id}, batch {batch_id}) failed: {str(exc)[:500]}"
                ) from exc
            except Exception as exc:
                raise DeltaError(
                    f"delta append to {uri} (app id {app_id}, batch {batch_id}) failed: {str(exc)[:500]}"
                ) from exc
            return True

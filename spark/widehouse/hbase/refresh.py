"""Family ``s`` of a day table := the stream's day columns from ClickHouse (the *refresh*), and its
skip when nothing changed.

:func:`refresh_stream_family` is what every hourly finalize runs for the day of the hour it
finalized, and step 2 of the daily merge: ClickHouse ``<T>_merged`` for the day -> family ``s``,
salt bucket by salt bucket (absolute puts; rows the stream no longer has lose the family).

**The skip.** At a million users the refresh is ~45 s, and the daily merge used to redo exactly
what the last hourly refresh had written. So a refresh that completes leaves a *marker* in the day
table: row ``~refresh|<yyyymmdd>`` (``~`` sorts after every salt, so no bucket's scan sees it), cell
``s:refresh``, holding a fingerprint of what it read (:func:`partials_fingerprint`) and how many rows
it wrote. A later refresh of the day whose fingerprint equals the marker's writes nothing
(:attr:`~widehouse.hbase.day.FamilyWrite.unchanged`). The marker is deleted before a refresh writes
anything and written after its last bucket, so a crashed refresh leaves none; it lives in the HBase
table it describes, so a re-created or truncated table has none.

The fingerprint covers everything the family's content depends on:

- the day's partition of ``<T>_partial`` (``toYYYYMMDD(hour)``): over its active parts, the lowest
  and highest block numbers and the highest mutation version (block numbers only grow: an insert
  adds a higher one, a mutation such as ``ALTER ... DELETE`` raises the version; background merges
  keep all three), and whether it has parts at all (a dropped partition);
- the partial table's UUID and metadata time (a re-created or altered table), the merged view's
  definition (its text: the DDL of every run replaces the view, with a new UUID), the salt buckets
  and family ``s``'s columns (a catalog change).

What it cannot see: a part in the *middle* of the day's blocks dropped by hand (``ALTER TABLE ...
DROP PART``). After such surgery, run ``widehouse daily --rewrite-stream``. On a ClickHouse cluster
(``WIDEHOUSE_CLICKHOUSE_CLUSTER``) the parts live on every shard and there is no fingerprint: every
refresh rewrites the family.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from widehouse.catalog.schema import STREAM_FAMILY
from widehouse.errors import HBaseError
from widehouse.hbase.day import CHUNK_ROWS, FamilyWrite, FamilyWriter, thrift_failure
from widehouse.hbase.keys import SEPARATOR, day_text

if TYPE_CHECKING:
    import pyarrow as pa

    from widehouse.catalog import WideTable
    from widehouse.clickhouse import ClickHouse
    from widehouse.hbase.daytable import DayTable
    from widehouse.hbase.presplit import PresplitTool
    from widehouse.settings import HBaseSettings

log = logging.getLogger(__name__)
MARKER_CELL = f"{STREAM_FAMILY}:refresh".encode()
"""The marker's cell (in the stream family, beside no data cell: data rows use qualifier ``0``)."""

__all__ = [
    "MARKER_CELL",
    "RefreshMarker",
    "marker_row",
    "partials_fingerprint",
    "read_marker",
    "refresh_stream_family",
    "stream_day_batches",
    "write_stream_batches",
]


@dataclass(frozen=True)
class RefreshMarker:
    """What the last complete refresh of a day read (its fingerprint) and wrote."""

    fingerprint: str
    rows: int
    refreshed_at: str
    """UTC ISO time the refresh completed."""

    def encode(self) -> bytes:
        return json.dumps(
            {"fingerprint": self.fingerprint, "rows": self.rows, "refreshed_at": self.refreshed_at},
            sort_keys=True,
        ).encode()

    @classmethod
    def decode(cls, cell: bytes) -> RefreshMarker | None:
        """The marker in ``cell``, or None for a cell that is not one (then the refresh runs)."""
        try:
            data = json.loads(cell)
            return cls(str(data["fingerprint"]), int(data["rows"]), str(data["refreshed_at"]))
        except (ValueError, TypeError, KeyError):
            return None


def marker_row(day: dt.date) -> bytes:
    """The marker's row key for ``day``: ``~refresh|<yyyymmdd>`` (after every salt bucket)."""
    return f"~refresh{SEPARATOR}{day_text(day)}".encode()


def read_marker(hbase_table: Any, day: dt.date) -> RefreshMarker | None:
    """The marker of ``day`` in an open day table (happybase ``Table``), or None."""
    cell = hbase_table.row(marker_row(day), columns=[MARKER_CELL]).get(MARKER_CELL)
    return None if cell is None else RefreshMarker.decode(cell)


def partials_fingerprint(client: ClickHouse, table: WideTable, day: dt.date, spec: DayTable) -> str | None:
    """A fingerprint of what a refresh of ``day`` reads (see the module docstring); None on a
    ClickHouse cluster. Read it *before* the refresh reads the data: an insert during the refresh
    then leaves a marker that no longer matches, and the next refresh runs."""
    from widehouse.clickhouse.ddl import table_names

    if client.cluster is not None:
        return None
    names = table_names(table)
    where = {"db": client.database, "p": names.partial, "m": names.merged}
    # the partial table by identity (a re-created or altered table); the merged view by content
    # (every run's DDL replaces the view: a new UUID and time, the same query)
    tables = client.rows(
        "SELECT name, if(name = {p:String}, toString(uuid), ''), "
        "if(name = {p:String}, toString(metadata_modification_time), create_table_query) "
        "FROM system.tables WHERE database = {db:String} AND name IN ({p:String}, {m:String}) ORDER BY name",
        where,
    )
    parts = client.rows(
        "SELECT count() > 0, min(min_block_number), max(max_block_number), "
        "max(toUInt64OrZero(splitByChar('_', name)[5])) FROM system.parts "
        "WHERE database = {db:String} AND table = {p:String} AND partition_id = {d:String} AND active",
        {**where, "d": day_text(day)},
    )
    payload = {
        "tables": [list(map(str, row)) for row in tables],
        "parts": [int(value) for value in parts[0]],
        "buckets": spec.buckets,
        "columns": [list(column) for column in spec.stream],
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:32]


def stream_day_batches(
    client: ClickHouse, table: WideTable, day: dt.date, buckets: int, span: range | None = None
) -> contextlib.AbstractContextManager[Iterator[pa.RecordBatch]]:
    """The stream's day columns of ``table`` for ``day`` (``<T>_merged``, partials merged per day)
    of the salt buckets in ``span`` (default: all), streamed in blocks ordered by salt bucket, with
    the bucket in column ``_bucket``.

    ClickHouse's ``CRC32`` is zlib's, so ``CRC32(toString(key)) % buckets`` is
    :func:`~widehouse.hbase.keys.salt_of`. The bucket depends on the view's GROUP BY key only, so
    ClickHouse filters the partials before it aggregates them."""
    from widehouse.clickhouse.ddl import q, table_names

    span = span if span is not None else range(buckets)
    key = q(table.key_name)
    salt = f"toUInt32(CRC32(toString({key})) % {int(buckets)})"
    return client.arrow_batches(
        f"SELECT *, {salt} AS _bucket FROM {q(table_names(table).merged)} "
        f"WHERE {q(table.period)} = {{d:Date}} AND {salt} BETWEEN {span.start} AND {span.stop - 1} "
        "ORDER BY _bucket",
        {"d": day.isoformat()},
        settings={"max_block_size": CHUNK_ROWS},
    )


def write_stream_batches(
    writer: FamilyWriter, batches: Iterable[pa.RecordBatch], span: range | None = None
) -> FamilyWrite:
    """Put the blocks (ordered by ``_bucket``, all within ``span``: by default every bucket) and
    prune each bucket of ``span`` once its rows are all put."""
    import pyarrow as pa
    import pyarrow.compute as pc

    span = span if span is not None else range(writer.spec.buckets)
    done = span.start  # buckets below this one are finished
    for batch in batches:
        if batch.num_rows == 0:
            continue
        bucket_column = batch.column("_bucket")
        first, last = (value.as_py() for value in pc.min_max(bucket_column).values())
        if first < done or last >= span.stop:
            raise HBaseError(
                f"stream rows of {writer.spec.name} came out of salt-bucket order or outside buckets "
                f"{span.start}-{span.stop - 1} (bucket {first if first < done else last})"
            )
        rows = pa.Table.from_batches([batch])
        for bucket in range(done, last + 1):
            # buckets from ``done`` up to ``first`` have no rows in this block: they only finish
            if bucket >= first:
                part = rows if first == last else rows.filter(pc.equal(bucket_column, bucket))
                writer.put(part)
            if bucket < last:
                writer.finish_bucket(bucket)
        done = last
    for bucket in range(done, span.stop):
        writer.finish_bucket(bucket)
    return writer.result


def refresh_stream_family(
    client: ClickHouse,
    settings: HBaseSettings,
    table: WideTable,
    day: dt.date,
    *,
    buckets: int | None = None,
    presplit: PresplitTool | None = None,
    rewrite: bool = False,
) -> FamilyWrite:
    """Family ``s`` of ``table``'s day rows := the stream's day columns from ClickHouse.

    Nothing is written when the day's marker says a complete refresh already read exactly what is
    there now (the module docstring; ``rewrite=True`` writes anyway): the result is then
    ``unchanged`` with the rows that refresh wrote.

    Otherwise, salt bucket by bucket, each bucket's rows of ``<T>_merged`` for ``day`` are
    streamed in blocks and every row's packed family cell is put (absolute puts; the family of rows
    the stream no longer has for the day is deleted once the bucket is done), so it can run after
    every finalized hour of the day and again in the daily merge. One ClickHouse query per bucket
    keeps what ClickHouse aggregates at once to a bucket's users (the whole day at a million users
    passed a 4 GiB query limit), and Python holds one block and one bucket's row keys per worker.
    ``settings.refresh_workers`` threads take buckets one at a time, each with its own Thrift
    connection and (when ``client`` can open one: a server, not in-process chDB) its own
    ClickHouse connection. Creates the day table (pre-split) when ``presplit`` is given and the
    table is missing. Raises HBaseError naming the Thrift server when HBase cannot be reached.
    """
    from thriftpy2.thrift import TException

    from widehouse.hbase.connection import connect
    from widehouse.hbase.daytable import check_day_table, day_table, ensure_day_table

    spec = day_table(table, settings, buckets)
    fingerprint = partials_fingerprint(client, table, day, spec)  # before anything is read
    connection = connect(settings)
    doing = f"checking {spec.name} for {day}"
    try:
        if presplit is not None:
            ensure_day_table(connection, spec, presplit)
        else:
            check_day_table(connection, spec)
        hbase_table = connection.table(spec.name)
        last = read_marker(hbase_table, day)
        if not rewrite and fingerprint is not None and last is not None and last.fingerprint == fingerprint:
            log.info(
                "%s %s: family s unchanged since the refresh of %s (%d rows): nothing written",
                spec.name,
                day,
                last.refreshed_at,
                last.rows,
            )
            return FamilyWrite(last.rows, 0, unchanged=True)
        hbase_table.delete(marker_row(day), columns=[MARKER_CELL])  # a crash from here leaves none
        doing = f"writing family s of {spec.name} for {day}"
        result = _refresh_all(client, settings, spec, table, day)
        if fingerprint is not None:
            doing = f"marking the refresh of {spec.name} for {day}"
            now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
            hbase_table.put(
                marker_row(day), {MARKER_CELL: RefreshMarker(fingerprint, result.rows, now).encode()}
            )
    except (TException, OSError) as exc:
        raise thrift_failure(settings, doing, exc) from exc
    finally:
        connection.close()
    log.info("%s %s: family s <- %d stream rows (%d pruned)", spec.name, day, result.rows, result.pruned)
    return result


def _refresh_all(
    client: ClickHouse, settings: HBaseSettings, spec: DayTable, table: WideTable, day: dt.date
) -> FamilyWrite:
    """Every salt bucket, on ``settings.refresh_workers`` threads (the first reads on ``client``).
    Once a worker fails, the others take no further bucket, and the first error is raised."""
    from concurrent.futures import ThreadPoolExecutor

    todo = iter(range(spec.buckets))
    lock = threading.Lock()
    failed = threading.Event()

    def next_bucket() -> int | None:
        with lock:
            return None if failed.is_set() else next(todo, None)

    def work(index: int) -> FamilyWrite:
        reader = client.sibling() if index else client  # the first worker reads on ``client``
        try:
            return _refresh_buckets(reader, settings, spec, table, day, next_bucket)
        except BaseException:  # any failure: stop the other workers at their next bucket, re-raise
            failed.set()
            raise
        finally:
            if reader is not client:
                reader.close()

    workers = max(1, min(settings.refresh_workers, spec.buckets))
    with ThreadPoolExecutor(workers, thread_name_prefix="widehouse-refresh") as pool:
        done = list(pool.map(work, range(workers)))
    return FamilyWrite(sum(d.rows for d in done), sum(d.pruned for d in done))


def _refresh_buckets(  # noqa: PLR0917 - one refresh worker's parts
    client: ClickHouse,
    settings: HBaseSettings,
    spec: DayTable,
    table: WideTable,
    day: dt.date,
    next_bucket: Callable[[], int | None],
) -> FamilyWrite:
    """One worker of :func:`refresh_stream_family`: buckets from ``next_bucket`` until None."""
    from thriftpy2.thrift import TException

    from widehouse.hbase.connection import connect

    bucket: int | None = None
    connection = connect(settings)
    try:
        writer = FamilyWriter(connection.table(spec.name), spec, STREAM_FAMILY, day)
        while (bucket := next_bucket()) is not None:
            span = range(bucket, bucket + 1)
            with stream_day_batches(client, table, day, spec.buckets, span) as batches:
                write_stream_batches(writer, batches, span)
        return writer.result
    except (TException, OSError) as exc:
        doing = f"writing family s of {spec.name} bucket {bucket} for {day}"
        raise thrift_failure(settings, doing, exc) from exc
    finally:
        connection.close()

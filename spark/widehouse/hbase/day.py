"""Write a family of a day table for one day, and read a salt bucket's day back.

Writes are re-run safe: every value is a put of its absolute value, a column that is null now is
deleted (it may hold an older run's value), and a row of the day that the new data no longer has
loses the whole family (:func:`write_family` with ``prune_buckets``). Running a write twice, or
after a crash at any point, leaves the same cells.

:func:`refresh_stream_family` is the stream half of the daily merge and what the hourly finalize
calls for the day of a finalized hour: ClickHouse ``<T>_merged`` for the day -> family ``s``.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from widehouse.catalog.schema import STREAM_FAMILY
from widehouse.errors import HBaseError
from widehouse.hbase.codec import decode_column, encode_column
from widehouse.hbase.keys import bucket_prefix, key_of, row_key

if TYPE_CHECKING:
    import pyarrow as pa

    from widehouse.catalog import WideTable
    from widehouse.clickhouse import ClickHouse
    from widehouse.hbase.daytable import DayTable
    from widehouse.hbase.presplit import PresplitTool
    from widehouse.settings import HBaseSettings

log = logging.getLogger(__name__)
BATCH_SIZE = 500
_KEYS_ONLY = b"KeyOnlyFilter() AND FirstKeyOnlyFilter()"


@dataclass(frozen=True)
class FamilyWrite:
    """What one write of a family did."""

    rows: int
    """Rows put (each with its non-null columns; its null columns deleted)."""
    pruned: int
    """Rows of the day that lost the family because the new data no longer has them."""


def thrift_failure(settings: HBaseSettings, doing: str, exc: BaseException) -> HBaseError:
    """The error for a Thrift call that failed: names the server, never a secret."""
    return HBaseError(
        f"HBase Thrift server at {settings.host}:{settings.port} failed while {doing}: "
        f"{type(exc).__name__}: {exc}"
    )


def write_family(  # noqa: PLR0917 - where, what and which buckets, named at call sites
    hbase_table: Any,
    spec: DayTable,
    family: str,
    day: dt.date,
    rows: pa.Table,
    prune_buckets: Iterable[int] = (),
) -> FamilyWrite:
    """Put ``rows`` (the key and the family's columns) into ``family`` for ``day``.

    ``prune_buckets``: salt buckets whose complete data ``rows`` is; rows of the day in them that
    ``rows`` lacks lose the family (give every bucket for a whole day's data).
    """
    columns = spec.columns(family)
    missing = [c for c, _ in columns if c not in rows.column_names]
    if spec.key_name not in rows.column_names or missing:
        raise HBaseError(f"rows for {spec.name}:{family} lack column(s) {[spec.key_name, *missing]}")
    keys = rows[spec.key_name].to_pylist()
    encoded = [(f"{family}:{c}".encode(), encode_column(rows[c], kind)) for c, kind in columns]
    written: set[bytes] = set()
    with hbase_table.batch(batch_size=BATCH_SIZE) as batch:
        for i, key in enumerate(keys):
            if key is None:
                raise HBaseError(f"rows for {spec.name}:{family} have a null {spec.key_name}")
            row = row_key(key, day, spec.buckets)
            written.add(row)
            puts = {qualifier: values[i] for qualifier, values in encoded if values[i] is not None}
            nulls = [qualifier for qualifier, values in encoded if values[i] is None]
            if puts:
                batch.put(row, puts)
            if nulls:
                batch.delete(row, columns=nulls)
    pruned = 0
    for bucket in prune_buckets:
        prefix = bucket_prefix(bucket, day, spec.buckets)
        stale = [
            row
            for row, _ in hbase_table.scan(row_prefix=prefix, columns=[family.encode()], filter=_KEYS_ONLY)
            if row not in written
        ]
        if stale:
            with hbase_table.batch(batch_size=BATCH_SIZE) as batch:
                for row in stale:
                    batch.delete(row, columns=[family.encode()])
        pruned += len(stale)
    return FamilyWrite(len(keys), pruned)


def scan_bucket(hbase_table: Any, spec: DayTable, day: dt.date, bucket: int) -> pa.Table:
    """One bucket's rows of ``day``, decoded: key, period, stream columns, offline columns.

    A row with only one family has the other's columns null (counts 0).
    """
    import pyarrow as pa

    from widehouse.hbase.codec import arrow_type

    names = [
        (f"{f}:{c}".encode(), c, kind)
        for f, cols in (("s", spec.stream), ("h", spec.offline))
        for c, kind in cols
    ]
    keys: list[str] = []
    cells: list[list[bytes | None]] = [[] for _ in names]
    prefix = bucket_prefix(bucket, day, spec.buckets)
    for row, data in hbase_table.scan(row_prefix=prefix, batch_size=2000):
        keys.append(key_of(row))
        for i, (qualifier, _, _) in enumerate(names):
            cells[i].append(data.get(qualifier))
    key_type = pa.int64() if spec.key_type == "long" else pa.string()
    arrays = [pa.array(keys, pa.string()).cast(key_type), pa.array([day] * len(keys), pa.date32())]
    arrays += [
        decode_column(values, kind, column) for values, (_, column, kind) in zip(cells, names, strict=True)
    ]
    fields = [pa.field(spec.key_name, key_type, False), pa.field(spec.period, pa.date32(), False)]
    fields += [pa.field(column, arrow_type(kind), kind != "count") for _, column, kind in names]
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def stream_day_rows(client: ClickHouse, table: WideTable, day: dt.date) -> pa.Table:
    """The stream's day columns of ``table`` for ``day``: ``<T>_merged`` (partials merged per day)."""
    from widehouse.clickhouse.ddl import q, table_names

    return client.arrow(
        f"SELECT * FROM {q(table_names(table).merged)} WHERE {q(table.period)} = {{d:Date}}",
        {"d": day.isoformat()},
    )


def refresh_stream_family(
    client: ClickHouse,
    settings: HBaseSettings,
    table: WideTable,
    day: dt.date,
    *,
    buckets: int | None = None,
    presplit: PresplitTool | None = None,
) -> FamilyWrite:
    """Family ``s`` of ``table``'s day rows := the stream's day columns from ClickHouse.

    Reads ``<T>_merged`` for ``day`` and writes every row's stream columns (absolute puts, deletes of
    columns that became null, and of the family of rows the stream no longer has for the day), so it
    can run after every finalized hour of the day and again in the daily merge. Creates the day
    table (pre-split) when ``presplit`` is given and the table is missing.
    Raises HBaseError naming the Thrift server when HBase cannot be reached.
    """
    from thriftpy2.thrift import TException

    from widehouse.hbase.connection import connect
    from widehouse.hbase.daytable import check_day_table, day_table, ensure_day_table

    spec = day_table(table, settings, buckets)
    rows = stream_day_rows(client, table, day)
    connection = connect(settings)
    try:
        if presplit is not None:
            ensure_day_table(connection, spec, presplit)
        else:
            check_day_table(connection, spec)
        result = write_family(
            connection.table(spec.name), spec, STREAM_FAMILY, day, rows, range(spec.buckets)
        )
    except (TException, OSError) as exc:
        raise thrift_failure(settings, f"writing family s of {spec.name} for {day}", exc) from exc
    finally:
        connection.close()
    log.info("%s %s: family s <- %d stream rows (%d pruned)", spec.name, day, result.rows, result.pruned)
    return result

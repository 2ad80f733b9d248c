"""Write a family of a day table for one day, and read a salt bucket's day back.

A family of a row is one packed cell (:mod:`widehouse.hbase.packed`). Writes are re-run safe: every
put replaces the row's whole family cell with its absolute values (a column null now is null in
it), and a row of the day that the new data no longer has loses the family (:meth:`FamilyWriter.
finish_bucket`). Running a write twice, or after a crash at any point, leaves the same cells.
Writes are bounded: rows are encoded :data:`CHUNK_ROWS` at a time and sent in Thrift batches of at
most :data:`BATCH_ROWS` rows and about :data:`BATCH_BYTES` bytes; scans fetch :data:`SCAN_ROWS`
rows per call.

The stream family's refresh from ClickHouse (what the hourly finalize and the daily merge run) is
:mod:`widehouse.hbase.refresh`.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from widehouse.catalog.schema import OFFLINE_FAMILY, STREAM_FAMILY
from widehouse.errors import HBaseError
from widehouse.hbase.keys import bucket_prefix, key_of, row_key, salted_row_keys
from widehouse.hbase.packed import FamilyLayout

if TYPE_CHECKING:
    import pyarrow as pa

    from widehouse.catalog import WideTable
    from widehouse.hbase.daytable import DayTable
    from widehouse.settings import HBaseSettings

log = logging.getLogger(__name__)
BATCH_ROWS = 1000
"""At most this many rows (one packed cell each) per Thrift ``mutateRows`` call."""
BATCH_BYTES = 4 << 20
"""... and about this many bytes of cells: what one write asks of the Thrift server and HBase."""
CHUNK_ROWS = 20_000
"""Rows encoded at once (Python memory per writer: one chunk's Arrow columns and cells)."""
SCAN_ROWS = 1000
"""Rows per Thrift ``scannerGetList`` call of a scan."""
_KEYS_ONLY = b"KeyOnlyFilter() AND FirstKeyOnlyFilter()"


@dataclass(frozen=True)
class FamilyWrite:
    """What one write of a family did."""

    rows: int
    """Rows put (each one packed cell of the family)."""
    pruned: int
    """Rows of the day that lost the family because the new data no longer has them."""
    unchanged: bool = False
    """Nothing was written: the family already held this data (``rows`` is what it holds; see
    :func:`widehouse.hbase.refresh.refresh_stream_family`)."""


def thrift_failure(settings: HBaseSettings, doing: str, exc: BaseException) -> HBaseError:
    """The error for a Thrift call that failed: names the server, never a secret."""
    return HBaseError(
        f"HBase Thrift server at {settings.host}:{settings.port} failed while {doing}: "
        f"{type(exc).__name__}: {exc}"
    )


def layout(spec: DayTable, family: str) -> FamilyLayout:
    """The packed-cell layout of one family of a day table (its catalog columns, in order)."""
    return FamilyLayout(spec.name, family, spec.columns(family))


class FamilyWriter:
    """Puts one family of a day's rows, chunk by chunk, and prunes the buckets it completed.

    Memory is one chunk plus the row keys of the buckets not yet pruned: feed rows grouped by salt
    bucket (:meth:`finish_bucket` after each) to keep that to one bucket's keys.
    """

    def __init__(self, hbase_table: Any, spec: DayTable, family: str, day: dt.date) -> None:
        self.hbase_table = hbase_table
        self.spec = spec
        self.family = family
        self.day = day
        self.layout = layout(spec, family)
        self.rows = 0
        self.pruned = 0
        self._written: dict[int, set[bytes]] = {}

    def put(self, rows: pa.Table) -> None:
        """Put ``rows`` (the key and the family's columns; any other columns are ignored)."""
        spec, family = self.spec, self.family
        missing = [c for c, _ in self.layout.columns if c not in rows.column_names]
        if spec.key_name not in rows.column_names or missing:
            raise HBaseError(f"rows for {spec.name}:{family} lack column(s) {[spec.key_name, *missing]}")
        for start in range(0, rows.num_rows, CHUNK_ROWS):
            self._put_chunk(rows.slice(start, CHUNK_ROWS))

    def _put_chunk(self, rows: pa.Table) -> None:
        keys = rows[self.spec.key_name].to_pylist()
        if None in keys:
            raise HBaseError(f"rows for {self.spec.name}:{self.family} have a null {self.spec.key_name}")
        cells = self.layout.encode(rows)
        sizes = cells.nbytes // max(1, len(cells))
        batch_rows = max(1, min(BATCH_ROWS, BATCH_BYTES // max(1, sizes)))
        qualifier = self.layout.cell
        buckets = self.spec.buckets
        with self.hbase_table.batch(batch_size=batch_rows) as batch:
            for (bucket, row), cell in zip(
                salted_row_keys(keys, self.day, buckets), cells.to_pylist(), strict=True
            ):
                self._written.setdefault(bucket, set()).add(row)
                batch.put(row, {qualifier: cell})
        self.rows += len(keys)

    def finish_bucket(self, bucket: int) -> int:
        """Delete the family of the day's rows in ``bucket`` that were not put; returns how many."""
        written = self._written.pop(bucket, set())
        prefix = bucket_prefix(bucket, self.day, self.spec.buckets)
        family = self.family.encode()
        stale = [
            row
            for row, _ in self.hbase_table.scan(
                row_prefix=prefix, columns=[family], filter=_KEYS_ONLY, batch_size=SCAN_ROWS
            )
            if row not in written
        ]
        if stale:
            with self.hbase_table.batch(batch_size=BATCH_ROWS) as batch:
                for row in stale:
                    batch.delete(row, columns=[family])
        self.pruned += len(stale)
        return len(stale)

    @property
    def result(self) -> FamilyWrite:
        return FamilyWrite(self.rows, self.pruned)


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
    writer = FamilyWriter(hbase_table, spec, family, day)
    writer.put(rows)
    for bucket in prune_buckets:
        writer.finish_bucket(bucket)
    return writer.result


def decode_rows(spec: DayTable, day: dt.date, rows: Iterable[tuple[bytes, dict[bytes, bytes]]]) -> pa.Table:
    """Rows as HBase returns them (row key, cells), decoded: key, period, stream columns, offline
    columns. A row with only one family has the other's columns null (counts 0)."""
    import pyarrow as pa

    from widehouse.hbase.codec import arrow_type

    layouts = [layout(spec, STREAM_FAMILY), layout(spec, OFFLINE_FAMILY)]
    names = [packed.cell for packed in layouts]
    keys: list[str] = []
    cells: list[list[bytes | None]] = [[] for _ in layouts]
    for row, data in rows:
        if len(data) > sum(1 for name in names if name in data):
            other = sorted(q.decode(errors="replace") for q in data if q not in names)[:3]
            raise HBaseError(
                f"HBase table {spec.name} row {row.decode(errors='replace')} has cells {other}: written "
                "by the one-cell-per-column layout, not packed families. Use a new "
                "WIDEHOUSE_HBASE_TABLE_PREFIX (or drop the table) and re-run the daily merge"
            )
        keys.append(key_of(row))
        for i, name in enumerate(names):
            cells[i].append(data.get(name))
    key_type = pa.int64() if spec.key_type == "long" else pa.string()
    arrays = [pa.array(keys, pa.string()).cast(key_type), pa.array([day] * len(keys), pa.date32())]
    fields = [pa.field(spec.key_name, key_type, False), pa.field(spec.period, pa.date32(), False)]
    for packed, family_cells in zip(layouts, cells, strict=True):
        arrays += packed.decode(family_cells)
        fields += [pa.field(c, arrow_type(kind), kind != "count") for c, kind in packed.columns]
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def scan_bucket(hbase_table: Any, spec: DayTable, day: dt.date, bucket: int) -> pa.Table:
    """One bucket's rows of ``day``, decoded (see :func:`decode_rows`)."""
    import pyarrow as pa

    return pa.concat_tables([decode_rows(spec, day, []), *scan_bucket_chunks(hbase_table, spec, day, bucket)])


def scan_bucket_chunks(
    hbase_table: Any, spec: DayTable, day: dt.date, bucket: int, chunk_rows: int = CHUNK_ROWS
) -> Iterator[pa.Table]:
    """One bucket's rows of ``day``, decoded ``chunk_rows`` rows at a time (none: no chunk)."""
    import itertools

    prefix = bucket_prefix(bucket, day, spec.buckets)
    families = [STREAM_FAMILY.encode(), OFFLINE_FAMILY.encode()]
    scanner = hbase_table.scan(row_prefix=prefix, columns=families, batch_size=SCAN_ROWS)
    while chunk := list(itertools.islice(scanner, chunk_rows)):
        yield decode_rows(spec, day, chunk)


def get_row(hbase_table: Any, spec: DayTable, key: int | str, day: dt.date) -> pa.Table:
    """One day row (one ``get``), decoded; an empty table when the row does not exist."""
    row = row_key(key, day, spec.buckets)
    data = hbase_table.row(row, columns=[STREAM_FAMILY.encode(), OFFLINE_FAMILY.encode()])
    return decode_rows(spec, day, [(row, data)] if data else [])


@dataclass(frozen=True)
class DayRow:
    """One decoded day row (:func:`read_day_row`): what ``widehouse hbase get`` prints."""

    hbase_table: str
    row_key: bytes
    values: list[tuple[str, str, Any]]
    """(family, column, value) in family and catalog order; empty when the row does not exist."""

    @property
    def found(self) -> bool:
        return bool(self.values)


def read_day_row(
    settings: HBaseSettings, table: WideTable, key: str, day: dt.date, buckets: int | None = None
) -> DayRow:
    """The day row of ``key`` for ``day`` in ``table``'s day table, read with one ``get`` and
    decoded with the catalog's layouts. ``key`` is text (a ``long`` key must be an integer)."""
    from thriftpy2.thrift import TException

    from widehouse.hbase.connection import connect
    from widehouse.hbase.daytable import check_day_table, day_table

    spec = day_table(table, settings, buckets)
    typed: int | str = key
    if spec.key_type == "long":
        try:
            typed = int(key)
        except ValueError as exc:
            raise HBaseError(f"key {key!r} of {table.name} must be an integer ({spec.key_name})") from exc
    connection = connect(settings)
    try:
        check_day_table(connection, spec)
        rows = get_row(connection.table(spec.name), spec, typed, day)
    except (TException, OSError) as exc:
        raise thrift_failure(settings, f"reading {spec.name} key {key} for {day}", exc) from exc
    finally:
        connection.close()
    values: list[tuple[str, str, Any]] = []
    if rows.num_rows:
        record = rows.to_pylist()[0]
        for family in (STREAM_FAMILY, OFFLINE_FAMILY):
            values += [(family, column, record[column]) for column, _ in spec.columns(family)]
    return DayRow(spec.name, row_key(typed, day, spec.buckets), values)

"""A daily wide table's HBase day table: name, families, typed columns, and its creation.

One HBase table per daily wide table, ``<WIDEHOUSE_HBASE_TABLE_PREFIX><table>`` (``wh_user_daily``;
a prefix ``ns:`` puts it in an existing namespace, a test prefix isolates tests). Two families with
one version each: ``s`` (the stream's day columns) and ``h`` (the offline Hive columns), each
stored as one packed cell per row, qualifier ``0`` (:mod:`widehouse.hbase.packed`), its columns
those of :class:`DayTable` in catalog order. Rows are keyed
``<salt>|<yyyymmdd>|<key>`` (:mod:`widehouse.hbase.keys`).

Creation (:func:`ensure_day_table`): the Thrift v1 API happybase speaks has no split keys
(``createTable(name, families)`` makes one region), so a missing table is created pre-split by
HBase's own ``RegionSplitter`` tool (:mod:`widehouse.hbase.presplit`). An existing table is checked:
both families, and region boundaries that are exactly the salt buckets' (a table split for another
bucket count would mix two key layouts; HBase's own later splits fall inside a bucket and are fine).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from widehouse.catalog.schema import OFFLINE_FAMILY, STREAM_FAMILY
from widehouse.errors import HBaseError
from widehouse.hbase.keys import SEPARATOR, check_buckets, split_keys

if TYPE_CHECKING:
    from widehouse.catalog import WideTable
    from widehouse.hbase.presplit import PresplitTool
    from widehouse.settings import HBaseSettings

FAMILIES = (STREAM_FAMILY, OFFLINE_FAMILY)


@dataclass(frozen=True)
class DayTable:
    """What a task needs to read or write a day table (plain values: it is shipped to executors)."""

    name: str
    buckets: int
    key_name: str
    key_type: str
    stream: tuple[tuple[str, str], ...]
    """(column, codec kind) of family ``s``, in catalog order; counts are kind ``count``."""
    offline: tuple[tuple[str, str], ...]
    """(column, codec kind) of family ``h``, in catalog order."""
    period: str = "day"

    def columns(self, family: str) -> tuple[tuple[str, str], ...]:
        if family == STREAM_FAMILY:
            return self.stream
        if family == OFFLINE_FAMILY:
            return self.offline
        raise HBaseError(f"day table {self.name} has no family {family!r} (families: {', '.join(FAMILIES)})")

    @property
    def output_columns(self) -> list[str]:
        """Columns of an extracted day: key, period, stream columns, offline columns."""
        return [self.key_name, self.period, *(c for c, _ in self.stream), *(c for c, _ in self.offline)]


def table_name(table: WideTable, settings: HBaseSettings) -> str:
    return f"{settings.table_prefix}{table.name}"


def day_table(table: WideTable, settings: HBaseSettings, buckets: int | None = None) -> DayTable:
    """The day table of a daily wide table (``buckets`` overrides ``WIDEHOUSE_HBASE_SALT_BUCKETS``)."""
    if table.grain != "day":
        raise HBaseError(
            f"wide table {table.name} has grain {table.grain}; HBase day tables are for daily tables"
        )
    stream = tuple((c.name, "count" if c.agg == "count" else c.value_type) for c in table.columns)
    offline = tuple((c.name, c.type) for c in table.offline_columns)
    return DayTable(
        name=table_name(table, settings),
        buckets=check_buckets(settings.salt_buckets if buckets is None else buckets),
        key_name=table.key_name,
        key_type=table.key_type,
        stream=stream,
        offline=offline,
        period=table.period,
    )


def ensure_day_table(connection: Any, spec: DayTable, tool: PresplitTool) -> bool:
    """Create the day table pre-split on its buckets if missing, else check it. True if created."""
    if spec.name.encode() not in set(connection.tables()):
        try:
            if spec.buckets == 1:
                connection.create_table(spec.name, {f: {"max_versions": 1} for f in FAMILIES})
            else:
                tool.create(spec.name, spec.buckets, FAMILIES)
        except Exception:  # another job may have created it meanwhile: then use that one
            if spec.name.encode() not in set(connection.tables()):
                raise
            check_day_table(connection, spec)
            return False
        check_day_table(connection, spec)
        return True
    check_day_table(connection, spec)
    return False


def check_day_table(connection: Any, spec: DayTable) -> None:
    """Both families present, and region boundaries between buckets exactly the bucket splits."""
    if spec.name.encode() not in set(connection.tables()):
        raise HBaseError(
            f"HBase day table {spec.name} does not exist; `widehouse daily` creates it (pre-split on "
            f"{spec.buckets} salt buckets)"
        )
    table = connection.table(spec.name)
    families = {name.decode() for name in table.families()}
    missing = [f for f in FAMILIES if f not in families]
    if missing:
        raise HBaseError(
            f"HBase table {spec.name} lacks column famil{'y' if len(missing) == 1 else 'ies'} "
            f"{', '.join(missing)}; it is not a day table (families {sorted(families)})"
        )
    starts = [r["start_key"] for r in table.regions()]
    boundaries = sorted(k for k in starts if k and SEPARATOR.encode() not in k)
    if boundaries != split_keys(spec.buckets):
        found = len(boundaries) + 1
        raise HBaseError(
            f"HBase table {spec.name} is pre-split for {found} salt bucket(s), not {spec.buckets}: its "
            f"rows are keyed for {found}. Use --salt-buckets {found} (or "
            f"WIDEHOUSE_HBASE_SALT_BUCKETS={found}), or another WIDEHOUSE_HBASE_TABLE_PREFIX for a new layout"
        )

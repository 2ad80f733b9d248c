"""Table shapes declared once, rendered for every store (ClickHouse, Delta/Spark, Arrow).

A :class:`Shape` is a table's columns (name, :data:`TYPES` kind, nullable, low-cardinality hint),
its partitioning and its ordering, with no store in mind. The renderers live with their stores:
:func:`widehouse.clickhouse.ddl.shape_ddl` (``CREATE TABLE``), :meth:`Shape.spark_ddl` (turned into
a ``StructType`` with ``DataType.fromDDL`` on the Spark side), :meth:`Shape.arrow_schema` (the rows
the driver builds and inserts). The catalog's wide tables have their own generator
(:mod:`widehouse.catalog.schema`, :mod:`widehouse.clickhouse.ddl`); this module serves the tables
the pipeline adds (quarantine, late events, progress, reconciliation, ...).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    import pyarrow as pa


class TypeMap(NamedTuple):
    """One column kind in each store."""

    clickhouse: str
    spark: str
    arrow: str
    """A pyarrow factory expression: ``int64``, ``string``, ``binary``, ``timestamp_utc``, ``date32``."""


TYPES: dict[str, TypeMap] = {
    "string": TypeMap("String", "string", "string"),
    "binary": TypeMap("String", "binary", "binary"),
    "int64": TypeMap("Int64", "bigint", "int64"),
    "uint64": TypeMap("UInt64", "bigint", "int64"),
    "float64": TypeMap("Float64", "double", "float64"),
    "boolean": TypeMap("Bool", "boolean", "bool_"),
    "timestamp": TypeMap("DateTime64(3, 'UTC')", "timestamp", "timestamp_utc"),
    "date": TypeMap("Date", "date", "date32"),
}
"""Column kinds and their type in each store. Timestamps are UTC, millisecond precision at rest."""


@dataclass(frozen=True)
class Col:
    """One column of a :class:`Shape`."""

    name: str
    kind: str
    nullable: bool = False
    low_cardinality: bool = False
    """A ClickHouse storage hint (``LowCardinality``); other stores ignore it."""

    def __post_init__(self) -> None:
        if self.kind not in TYPES:
            raise ValueError(f"column {self.name!r}: unknown kind {self.kind!r} (one of {', '.join(TYPES)})")


@dataclass(frozen=True)
class Shape:
    """A table's shape: columns, partitioning and ordering, independent of the store.

    ``partition_by`` names the column whose **date** partitions the table (ClickHouse
    ``toYYYYMMDD(col)``, Delta ``wh_date = to_date(col)``); ``order_by`` is ClickHouse's sort key;
    ``engine`` is the ClickHouse engine (``MergeTree`` or ``ReplacingMergeTree(<version col>)``).
    ``delta_indexed`` is how many leading columns Delta keeps statistics for.
    """

    name: str
    columns: tuple[Col, ...]
    partition_by: str
    order_by: tuple[str, ...]
    engine: str = "MergeTree"
    delta_indexed: int = 4

    def __post_init__(self) -> None:
        names = [c.name for c in self.columns]
        if len(set(names)) != len(names):
            raise ValueError(f"shape {self.name}: duplicate column names")
        for name in (self.partition_by, *self.order_by):
            if name not in names:
                raise ValueError(f"shape {self.name}: {name!r} is not one of its columns")

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def column(self, name: str) -> Col:
        for column in self.columns:
            if column.name == name:
                return column
        raise KeyError(name)

    # -- Delta / Spark -----------------------------------------------------------------------------
    DELTA_PARTITION = "wh_date"
    """The Delta partition column every shape's table adds: the date of ``partition_by``."""

    def spark_ddl(self) -> str:
        """Spark DDL of the Delta table: the columns, then the ``wh_date`` partition column."""
        columns = [f"`{c.name}` {TYPES[c.kind].spark}" for c in self.columns]
        return ", ".join([*columns, f"`{self.DELTA_PARTITION}` date"])

    # -- Arrow -------------------------------------------------------------------------------------
    def arrow_schema(self) -> pa.Schema:
        """The Arrow schema of the rows the driver builds (timestamps in µs, UTC)."""
        import pyarrow as pa

        def arrow_type(kind: str) -> pa.DataType:
            name = TYPES[kind].arrow
            if name == "timestamp_utc":
                return pa.timestamp("us", tz="UTC")
            factory = getattr(pa, name)
            return factory()

        # Every Arrow field is nullable: the stores enforce NOT NULL; Arrow casts stay simple.
        return pa.schema([pa.field(c.name, arrow_type(c.kind)) for c in self.columns])

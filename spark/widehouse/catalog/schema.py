"""Delta / Spark schemas and HBase column names of wide tables, as plain descriptions.

The light core describes every schema as :class:`ColumnSpec` (name, Spark SQL type, nullable);
:mod:`widehouse.catalog.spark` turns them into ``StructType`` objects. Shapes:

- **partial** (Delta ``bronze/<table>_partials``; what one micro-batch emits per (key, hour)):
  key, ``hour`` timestamp, then per column: count ``bigint`` (not null, 0 when empty); sum
  ``bigint``/``double``; min/max ``T``; first/last ``struct<ts: timestamp, v: T>`` (null when empty;
  merge with ``min``/``max`` of the struct, which orders by ts then v).
- **final** (Delta ``silver/<table>``): key, ``hour`` timestamp or ``day`` date, counts ``bigint``
  not null, everything else ``T`` nullable; daily tables add their offline columns.
- **HBase** day rows: stream columns in family ``s``, offline columns in family ``h``; the
  qualifier is the column name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from widehouse.catalog.model import WideColumn, WideTable
from widehouse.contracts.types import ARROW_OF_SPARK, SPARK_VALUE_TYPES, arrow_type

if TYPE_CHECKING:
    import pyarrow as pa

STREAM_FAMILY = "s"
OFFLINE_FAMILY = "h"
PACKED_QUALIFIER = "0"
"""A day row's family is one packed cell, ``<family>:0`` (the encoding: :mod:`widehouse.hbase.packed`)."""


@dataclass(frozen=True)
class ColumnSpec:
    name: str
    spark_type: str
    nullable: bool = True

    def ddl(self) -> str:
        return f"`{self.name}` {self.spark_type}" + ("" if self.nullable else " NOT NULL")


def partial_spark_type(column: WideColumn) -> str:
    value = SPARK_VALUE_TYPES[column.value_type]
    if column.agg == "count":
        return "bigint"
    if column.is_pair:
        return f"struct<ts:timestamp,v:{value}>"
    return value


def final_spark_type(column: WideColumn) -> str:
    return "bigint" if column.agg == "count" else SPARK_VALUE_TYPES[column.value_type]


def _key(table: WideTable) -> ColumnSpec:
    return ColumnSpec(table.key_name, SPARK_VALUE_TYPES[table.key_type], nullable=False)


def partial_columns(table: WideTable) -> list[ColumnSpec]:
    """Columns of a partial row (per key and hour), for any grain."""
    columns = [_key(table), ColumnSpec("hour", "timestamp", nullable=False)]
    columns += [ColumnSpec(c.name, partial_spark_type(c), nullable=c.agg != "count") for c in table.columns]
    return columns


def final_columns(table: WideTable) -> list[ColumnSpec]:
    """Columns of a final row at the table's grain (stream, then offline columns)."""
    period = (
        ColumnSpec("hour", "timestamp", False) if table.grain == "hour" else ColumnSpec("day", "date", False)
    )
    columns = [_key(table), period]
    columns += [ColumnSpec(c.name, final_spark_type(c), nullable=c.agg != "count") for c in table.columns]
    columns += [ColumnSpec(c.name, SPARK_VALUE_TYPES[c.type]) for c in table.offline_columns]
    return columns


def schema_ddl(columns: list[ColumnSpec]) -> str:
    """``\\`uid\\` bigint NOT NULL, \\`hour\\` timestamp NOT NULL, ...`` (Spark DDL)."""
    return ", ".join(c.ddl() for c in columns)


def hbase_columns(table: WideTable) -> dict[str, bytes]:
    """``{column: b"family:0[i]"}`` for a day row: where each column sits, the i-th value of its
    family's packed cell (stream columns in ``s:0``, offline in ``h:0``, in catalog order)."""
    families = (
        (STREAM_FAMILY, [c.name for c in table.columns]),
        (OFFLINE_FAMILY, [c.name for c in table.offline_columns]),
    )
    return {
        name: f"{family}:{PACKED_QUALIFIER}[{i}]".encode()
        for family, names in families
        for i, name in enumerate(names)
    }


def arrow_schema(columns: list[ColumnSpec]) -> pa.Schema:
    """The Arrow schema of Spark-typed columns (timestamps in µs, UTC), e.g. of :func:`final_columns`."""
    import pyarrow as pa

    fields = []
    for column in columns:
        kind = arrow_type(ARROW_OF_SPARK[column.spark_type])
        fields.append(pa.field(column.name, kind, nullable=column.nullable))
    return pa.schema(fields)

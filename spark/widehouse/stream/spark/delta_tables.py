"""Delta tables the stream writes: created up front (with their schemas) so concurrent groups never
race to create one, and every write is cast to the table's schema.

Partial tables add pipeline metadata to the catalog's partial schema: ``wh_group``, ``wh_batch_id``
(which micro-batch wrote the row) and the partition columns ``wh_date``, ``wh_hour``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from widehouse.catalog import Catalog
from widehouse.catalog.spark import partial_schema
from widehouse.settings import DeltaSettings
from widehouse.stream.tables import SIDE_SHAPES, delta_partials, delta_side

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

PARTIAL_META = "wh_group string, wh_batch_id bigint, wh_date date, wh_hour int"
# Delta collects min/max statistics of the first N columns of every file it writes; for these
# write-heavy, append-only tables only the leading key / time columns are worth it (all 60+
# columns cost ~0.4 s per micro-batch commit on a 2-core box). Side tables declare theirs in their shape.
PARTIAL_INDEXED_COLUMNS = 2


def _struct(ddl: str) -> StructType:
    from pyspark.sql.types import DataType, StructType

    parsed = DataType.fromDDL(ddl)
    assert isinstance(parsed, StructType)
    return parsed


def partial_table_schema(catalog: Catalog, table: str) -> StructType:
    from pyspark.sql.types import StructType

    base = partial_schema(catalog.table(table))
    return StructType([*base.fields, *_struct(PARTIAL_META).fields])


def side_table_schema(name: str) -> StructType:
    """The Delta schema of a side table, from its declared shape (plus the ``wh_date`` partition)."""
    return _struct(SIDE_SHAPES[name].spark_ddl())


def ensure_delta(
    spark: SparkSession, catalog: Catalog, delta: DeltaSettings, tables: tuple[str, ...]
) -> None:
    """Create the partial tables of ``tables`` and the side tables if missing (idempotent), with
    statistics limited to their leading columns."""
    from delta.tables import DeltaTable

    targets: list[tuple[str, StructType, list[str], int]] = [
        (
            delta_partials(delta, t),
            partial_table_schema(catalog, t),
            ["wh_date", "wh_hour"],
            PARTIAL_INDEXED_COLUMNS,
        )
        for t in tables
    ]
    targets += [
        (delta_side(delta, s.name), side_table_schema(s.name), [s.DELTA_PARTITION], s.delta_indexed)
        for s in SIDE_SHAPES.values()
    ]
    for path, schema, partitions, indexed in targets:
        table = (
            DeltaTable.createIfNotExists(spark)
            .location(path)
            .addColumns(schema)
            .partitionedBy(*partitions)
            .property("delta.dataSkippingNumIndexedCols", str(indexed))
            .execute()
        )
        detail = table.detail().select("properties").first()
        properties = (detail[0] if detail is not None else None) or {}
        if properties.get("delta.dataSkippingNumIndexedCols") != str(indexed):
            setting = f"'delta.dataSkippingNumIndexedCols' = '{indexed}'"
            spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ({setting})")


def conform(df: DataFrame, schema: StructType) -> DataFrame:
    """``df`` with exactly the columns of ``schema``, in order, cast to its types (missing: null)."""
    from pyspark.sql import functions as F  # noqa: N812

    present = set(df.columns)
    return df.select(
        *[
            (F.col(f.name) if f.name in present else F.lit(None)).cast(f.dataType).alias(f.name)
            for f in schema.fields
        ]
    )

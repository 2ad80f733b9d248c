"""Read the stream's wide rows back from Delta: partial rows merged to final values.

The Delta twin of ClickHouse's ``<table>_merged`` view (same merge functions, pairs unwrapped to
their value, day tables merged over their hours), for analysts, reconciliation and tests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from widehouse.catalog import Catalog
from widehouse.settings import DeltaSettings
from widehouse.stream.tables import delta_partials

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def merged_rows(spark: SparkSession, catalog: Catalog, delta: DeltaSettings, table: str) -> DataFrame:
    """Final values per (key, hour) or (key, day) from ``bronze/<table>_partials``."""
    from pyspark.sql import functions as F  # noqa: N812

    wide = catalog.table(table)
    partials = spark.read.format("delta").load(delta_partials(delta, table))
    period = F.col("hour") if wide.grain == "hour" else F.to_date("hour")
    merges = {"sum": F.sum, "min": F.min, "max": F.max}
    aggs = []
    for column in wide.columns:
        merged = merges[column.merge_function](F.col(column.name))
        aggs.append((merged.getField("v") if column.is_pair else merged).alias(column.name))
    return partials.groupBy(F.col(wide.key_name), period.alias(wide.grain)).agg(*aggs)

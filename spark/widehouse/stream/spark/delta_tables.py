"""The Spark schemas of the stream's bronze Delta tables, as Spark reads them.

The tables are created and written by the stream's delta-rs writer (:mod:`widehouse.stream.bronze`);
these schemas are what Spark must see in them (tests compare the two). Partial tables add pipeline
metadata to the catalog's partial schema: ``wh_group``, ``wh_batch_id`` (which micro-batch wrote the
row) and the partition columns ``wh_date``, ``wh_hour``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from widehouse.catalog import Catalog
from widehouse.catalog.spark import partial_schema
from widehouse.stream.tables import SIDE_SHAPES

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

PARTIAL_META = "wh_group string, wh_batch_id bigint, wh_date date, wh_hour int"


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

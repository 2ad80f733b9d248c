"""The Spark schemas of the stream's bronze side tables, as Spark reads them.

The tables are created and written by the stream's delta-rs writer (:mod:`widehouse.stream.bronze`);
these schemas are what Spark must see in them (tests compare the two).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from widehouse.contracts.tables import SIDE_SHAPES

if TYPE_CHECKING:
    from pyspark.sql.types import StructType


def _struct(ddl: str) -> StructType:
    from pyspark.sql.types import DataType, StructType

    parsed = DataType.fromDDL(ddl)
    assert isinstance(parsed, StructType)
    return parsed


def side_table_schema(name: str) -> StructType:
    """The Delta schema of a side table, from its declared shape (plus the ``wh_date`` partition)."""
    return _struct(SIDE_SHAPES[name].spark_ddl())

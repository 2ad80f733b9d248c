"""Spark ``StructType`` schemas from the catalog: topic payloads, partial rows, final rows.

- :func:`topic_schema` parses a topic's JSON (``from_json``); ``timestamp-ms`` fields are ``long``
  epoch ms there, as in the payload.
- :func:`partial_schema` / :func:`final_schema` are the Delta schemas of a wide table's partial
  rows (per key and hour) and final rows (see :mod:`widehouse.catalog.schema` for the shapes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from widehouse.catalog.model import Topic, WideTable
from widehouse.catalog.schema import ColumnSpec, final_columns, partial_columns
from widehouse.catalog.types import Field, FieldType
from widehouse.contracts.types import SPARK_PAYLOAD_TYPES

if TYPE_CHECKING:
    from pyspark.sql.types import DataType, StructType


def _payload_type(kind: FieldType) -> DataType:
    from pyspark.sql import types

    if kind.kind in SPARK_PAYLOAD_TYPES:
        return spark_type(SPARK_PAYLOAD_TYPES[kind.kind])
    if kind.kind == "array":
        assert kind.element is not None
        return types.ArrayType(_payload_type(kind.element), containsNull=True)
    if kind.kind == "map":
        assert kind.element is not None
        return types.MapType(types.StringType(), _payload_type(kind.element), valueContainsNull=True)
    return _struct(kind.fields)


def _struct(fields: tuple[Field, ...]) -> StructType:
    from pyspark.sql import types

    return types.StructType([types.StructField(f.name, _payload_type(f.type), nullable=True) for f in fields])


def topic_schema(topic: Topic) -> StructType:
    """The payload schema of ``topic`` for ``from_json`` (every field nullable)."""
    return _struct(topic.fields)


def spark_type(text: str) -> DataType:
    """A Spark type from the DDL names :mod:`widehouse.catalog.schema` produces (no session needed)."""
    from pyspark.sql import types

    simple: dict[str, DataType] = {
        "bigint": types.LongType(),
        "int": types.IntegerType(),
        "double": types.DoubleType(),
        "string": types.StringType(),
        "boolean": types.BooleanType(),
        "timestamp": types.TimestampType(),
        "date": types.DateType(),
    }
    if text in simple:
        return simple[text]
    if text.startswith("struct<") and text.endswith(">"):
        fields = []
        for part in text[len("struct<") : -1].split(","):
            name, _, kind = part.partition(":")
            fields.append(types.StructField(name, spark_type(kind), nullable=True))
        return types.StructType(fields)
    raise ValueError(f"unsupported Spark type {text!r}")


def _from_specs(specs: list[ColumnSpec]) -> StructType:
    from pyspark.sql import types

    return types.StructType(
        [types.StructField(s.name, spark_type(s.spark_type), nullable=s.nullable) for s in specs]
    )


def partial_schema(table: WideTable) -> StructType:
    """Delta schema of partial rows: key, hour, one partial column per stream column."""
    return _from_specs(partial_columns(table))


def final_schema(table: WideTable) -> StructType:
    """Delta schema of final rows at the table's grain (stream, then offline columns)."""
    return _from_specs(final_columns(table))

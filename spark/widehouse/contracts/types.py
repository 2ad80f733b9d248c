"""Catalog kinds rendered for each store: one table, one row per scalar kind of ``schemas/``.

A payload field or a wide column has a catalog kind (``long``, ``int``, ``double``, ``string``,
``boolean``, ``timestamp-ms``); each store spells it its own way. The renderings differ where the
stores do: inside a topic payload a ``timestamp-ms`` is an epoch-milliseconds number, in a wide row
it is a real UTC timestamp (microseconds in Spark and the stream's Arrow batches, milliseconds in
ClickHouse and in HBase cells).

Spark types are DDL strings (``bigint``); the ``spark`` leaves turn them into ``DataType`` objects,
so this module imports no pyspark. Arrow types are names resolved by :func:`arrow_type` (pyarrow is
imported only when called).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True)
class KindTypes:
    """One catalog kind in each store."""

    spark_payload: str
    """Spark DDL type inside a topic payload (what ``from_json`` reads)."""
    spark_value: str
    """Spark DDL type of a value in a wide row, partial or final (and in Delta)."""
    clickhouse: str
    """ClickHouse column type."""
    arrow_payload: str
    """Arrow type name of the payload value as decoded from a message."""
    arrow_value: str
    """Arrow type name of a value in the stream's partial rows (Spark's timestamps: microseconds)."""
    hbase: str
    """Arrow type name of a value in the HBase day table's cells (timestamps: milliseconds)."""
    flink_payload: str
    """Flink SQL type inside a topic payload (``bench flink_compare``; timestamps: epoch ms, as sent)."""


KIND_TYPES: dict[str, KindTypes] = {
    "long": KindTypes("bigint", "bigint", "Int64", "int64", "int64", "int64", "BIGINT"),
    "int": KindTypes("int", "int", "Int32", "int32", "int32", "int32", "INT"),
    "double": KindTypes("double", "double", "Float64", "float64", "float64", "float64", "DOUBLE"),
    "string": KindTypes("string", "string", "String", "string", "string", "string", "STRING"),
    "boolean": KindTypes("boolean", "boolean", "Bool", "bool_", "bool_", "bool_", "BOOLEAN"),
    "timestamp-ms": KindTypes(
        "bigint",
        "timestamp",
        "DateTime64(3, 'UTC')",
        "int64",
        "timestamp_us_utc",
        "timestamp_ms_utc",
        "BIGINT",
    ),
}
"""The catalog's scalar kinds, in the order the catalog documents them."""

SPARK_PAYLOAD_TYPES: dict[str, str] = {k: t.spark_payload for k, t in KIND_TYPES.items()}
SPARK_VALUE_TYPES: dict[str, str] = {k: t.spark_value for k, t in KIND_TYPES.items()}
CLICKHOUSE_TYPES: dict[str, str] = {k: t.clickhouse for k, t in KIND_TYPES.items()}
FLINK_PAYLOAD_TYPES: dict[str, str] = {k: t.flink_payload for k, t in KIND_TYPES.items()}

REGISTRY_EXTRA_SPARK: dict[str, str] = {"float": "float", "bytes": "binary"}
"""Schema-registry (Avro) kinds the catalog does not declare but the source still reads."""
REGISTRY_EXTRA_ARROW: dict[str, str] = {"float": "float32", "bytes": "binary"}

ARROW_OF_SPARK: dict[str, str] = {
    "bigint": "int64",
    "int": "int32",
    "double": "float64",
    "string": "string",
    "boolean": "bool_",
    "timestamp": "timestamp_us_utc",
    "date": "date32",
}
"""Arrow type name of each Spark DDL type a wide row uses (Spark's timestamps are UTC microseconds)."""


def arrow_type(name: str) -> pa.DataType:
    """The pyarrow type of an Arrow type name of this module (``int64``, ``timestamp_ms_utc``, ...)."""
    import pyarrow as pa

    if name.startswith("timestamp_") and name.endswith("_utc"):
        return pa.timestamp(name[len("timestamp_") : -len("_utc")], tz="UTC")
    factory = getattr(pa, name, None)
    if factory is None or name.startswith("_"):
        raise ValueError(f"unknown Arrow type name {name!r}")
    kind: pa.DataType = factory()
    return kind


__all__ = [
    "ARROW_OF_SPARK",
    "CLICKHOUSE_TYPES",
    "FLINK_PAYLOAD_TYPES",
    "KIND_TYPES",
    "REGISTRY_EXTRA_ARROW",
    "REGISTRY_EXTRA_SPARK",
    "SPARK_PAYLOAD_TYPES",
    "SPARK_VALUE_TYPES",
    "KindTypes",
    "arrow_type",
]

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
from widehouse.stream.tables import LATE, PROGRESS, QUARANTINE, delta_partials, delta_side

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

PARTIAL_META = "wh_group string, wh_batch_id bigint, wh_date date, wh_hour int"
# Delta collects min/max statistics of the first N columns of every file it writes; for these
# write-heavy, append-only tables only the leading key / time columns are worth it (all 60+
# columns cost ~0.4 s per micro-batch commit on a 2-core box).
INDEXED_COLUMNS = {"partial": 2, QUARANTINE: 6, LATE: 6, PROGRESS: 4}
SIDE_SCHEMAS: dict[str, tuple[str, list[str]]] = {
    QUARANTINE: (
        "app string, group string, batch_id bigint, topic string, message_id string, publish_time timestamp, "
        "reason string, detail string, payload binary, payload_bytes bigint, wh_date date",
        ["wh_date"],
    ),
    LATE: (
        "app string, group string, batch_id bigint, topic string, message_id string, publish_time timestamp, "
        "event_time timestamp, key string, payload binary, payload_bytes bigint, wh_date date",
        ["wh_date"],
    ),
    PROGRESS: (
        "app string, group string, batch_id bigint, topic string, rows_in bigint, rows_out bigint, "
        "bad bigint, late bigint, lag bigint, max_event_time timestamp, min_publish_time timestamp, "
        "max_publish_time timestamp, batch_time timestamp, committed_at timestamp, duration_ms bigint, "
        "watermark timestamp, wh_date date",
        ["wh_date"],
    ),
}


def partial_table_schema(catalog: Catalog, table: str) -> StructType:
    from pyspark.sql.types import StructType, _parse_datatype_string

    base = partial_schema(catalog.table(table))
    meta = _parse_datatype_string(PARTIAL_META)
    assert isinstance(meta, StructType)
    return StructType([*base.fields, *meta.fields])


def side_table_schema(name: str) -> StructType:
    from pyspark.sql.types import StructType, _parse_datatype_string

    parsed = _parse_datatype_string(SIDE_SCHEMAS[name][0])
    assert isinstance(parsed, StructType)
    return parsed


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
            INDEXED_COLUMNS["partial"],
        )
        for t in tables
    ]
    targets += [
        (delta_side(delta, n), side_table_schema(n), SIDE_SCHEMAS[n][1], INDEXED_COLUMNS[n])
        for n in SIDE_SCHEMAS
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

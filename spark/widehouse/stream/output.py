"""The transform output's one tagged Arrow schema: what the reading tasks yield
(:mod:`widehouse.stream.transform`), what the driver merges (:mod:`widehouse.stream.merge`) and the
bronze tables and sinks read.

:func:`output_schema` is the schema of everything a task yields for a :class:`TransformPlan`:
partial rows (``wh_kind = 'partial'``, each table's columns prefixed ``t<i>_``), quarantine, late
and stats rows (:data:`META_FIELDS`). It lives apart from the plan so that Spark's
``create_data_source`` process, which unpickles each group's source (plan included) only to ask
its schema, imports no pyarrow (~65 ms a group, on the start-up's path; pyspark's own module for
that process imports none either).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from widehouse.contracts.types import ARROW_OF_SPARK, KIND_TYPES, arrow_type

if TYPE_CHECKING:
    from widehouse.catalog import WideTable
    from widehouse.stream.plan import TransformPlan

TIMESTAMP = arrow_type(ARROW_OF_SPARK["timestamp"])
ARROW_VALUE_TYPES: dict[str, pa.DataType] = {k: arrow_type(t.arrow_value) for k, t in KIND_TYPES.items()}

# the columns shared by quarantine, late and stats rows
META_FIELDS: tuple[pa.Field, ...] = (
    pa.field("wh_kind", pa.string(), nullable=False),
    pa.field("wh_table", pa.string()),
    pa.field("wh_topic", pa.string()),
    pa.field("wh_message_id", pa.string()),
    pa.field("wh_publish_time", TIMESTAMP),
    pa.field("wh_event_time", TIMESTAMP),
    pa.field("wh_key", pa.string()),
    pa.field("wh_reason", pa.string()),
    pa.field("wh_detail", pa.string()),
    pa.field("wh_payload", pa.binary()),
    pa.field("wh_payload_bytes", pa.int64()),
    pa.field("wh_rows_in", pa.int64()),
    pa.field("wh_good", pa.int64()),
    pa.field("wh_bad", pa.int64()),
    pa.field("wh_late", pa.int64()),
    pa.field("wh_max_event_time", TIMESTAMP),
    pa.field("wh_min_publish_time", TIMESTAMP),
    pa.field("wh_max_publish_time", TIMESTAMP),
)


def value_arrow_type(column_agg: str, value_type: str) -> pa.DataType:
    """Arrow type of a partial column (count -> int64; first/last -> struct<ts, v>)."""
    value = ARROW_VALUE_TYPES[value_type]
    if column_agg == "count":
        return pa.int64()
    if column_agg in ("first", "last"):
        return pa.struct([pa.field("ts", TIMESTAMP), pa.field("v", value)])
    return value


def table_fields(plan: TransformPlan, table: WideTable) -> list[pa.Field]:
    prefix = plan.prefix(table.name)
    fields = [
        pa.field(f"{prefix}{table.key_name}", ARROW_VALUE_TYPES[table.key_type]),
        pa.field(f"{prefix}hour", TIMESTAMP),
    ]
    fields += [pa.field(f"{prefix}{c.name}", value_arrow_type(c.agg, c.value_type)) for c in table.columns]
    return fields


def output_schema(plan: TransformPlan) -> pa.Schema:
    fields = list(META_FIELDS)
    for name in plan.tables:
        fields += table_fields(plan, plan.catalog.table(name))
    return pa.schema(fields)


SIDE_COLUMNS: tuple[str, ...] = tuple(f.name for f in META_FIELDS)
TIME_COLUMNS = frozenset(
    {"wh_publish_time", "wh_event_time", "wh_max_event_time", "wh_min_publish_time", "wh_max_publish_time"}
)

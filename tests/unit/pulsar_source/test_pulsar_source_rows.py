"""The rows: Arrow batches exactly in the schema Spark expects."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    BinaryType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from tests.fake_pulsar import FakeMessage
from widehouse.source.messages import Messages
from widehouse.source.schema import COLUMNS, arrow_schema

SPARK_SCHEMA = StructType(
    [
        StructField("value", BinaryType()),
        StructField("__topic", StringType()),
        StructField("__key", StringType()),
        StructField("__messageId", StringType()),
        StructField("__publishTime", TimestampType()),
        StructField("__eventTime", TimestampType()),
        StructField("__properties", MapType(StringType(), StringType())),
    ]
)


def test_arrow_schema_is_what_spark_checks_against() -> None:
    assert arrow_schema().equals(to_arrow_schema(SPARK_SCHEMA, timezone="UTC"))
    assert tuple(arrow_schema().names) == COLUMNS


def test_columns_become_one_batch_with_nulls_and_maps() -> None:
    columns = Messages()
    rows = [
        (b"a", "k1", (5, 0, 2), 1_700_000_000_123, 1_600_000_000_000, {"x": "1", "y": "2"}),
        (b"b", "", (5, 1, -1), 1_700_000_000_124, 0, {}),
    ]
    for value, key, (ledger, entry, batch), publish, event, props in rows:
        columns.values.append(value)
        columns.keys.append(key)
        columns.messages.append(FakeMessage(ledger, entry, batch))
        columns.publish_ms.append(publish)
        columns.event.append(event)
        columns.prop_keys.extend(props)
        columns.prop_values.extend(props.values())
        columns.prop_offsets.append(len(columns.prop_keys))
    columns.runs.append(("persistent://t/ns/a", 3, 2))
    batch = columns.to_batch(arrow_schema())
    assert batch.schema.equals(arrow_schema())
    data = batch.to_pylist()
    assert [r["value"] for r in data] == [b"a", b"b"]
    assert [r["__key"] for r in data] == ["k1", None]
    assert [r["__messageId"] for r in data] == ["5:0:3:2", "5:1:3:-1"]
    assert data[0]["__publishTime"] == pa.scalar(1_700_000_000_123_000, arrow_schema().field(4).type).as_py()
    assert data[1]["__eventTime"] is None and data[0]["__eventTime"] is not None
    assert data[0]["__properties"] == [("x", "1"), ("y", "2")] and data[1]["__properties"] == []
    assert {r["__topic"] for r in data} == {"persistent://t/ns/a"}


def test_a_row_id_names_the_partition_of_its_run() -> None:
    """Rows of several slices in one chunk: each id carries the partition of the run it came from."""
    chunk = Messages()
    for ledger, entry in [(7, 0), (7, 1), (9, 4), (3, 2)]:
        chunk.values.append(b"{}")
        chunk.publish_ms.append(1)
        chunk.messages.append(FakeMessage(ledger, entry))
    chunk.runs += [
        ("persistent://t/ns/a", 0, 2),
        ("persistent://t/ns/a", 5, 1),
        ("persistent://t/ns/b", -1, 1),
    ]
    assert [chunk.message_id(i) for i in (3, 0, 2, 1)] == ["3:2:-1:-1", "7:0:0:-1", "9:4:5:-1", "7:1:0:-1"]
    assert chunk.topics() == ["persistent://t/ns/a"] * 3 + ["persistent://t/ns/b"]
    ids = chunk.to_batch(arrow_schema()).column("__messageId").to_pylist()
    assert ids == ["7:0:0:-1", "7:1:0:-1", "9:4:5:-1", "3:2:-1:-1"]

"""The rows the ``pulsar`` source yields: the message payload and its metadata.

| Column | Type | From |
|---|---|---|
| ``value`` | binary | the payload |
| ``__topic`` | string | the topic (a partitioned topic's own name, not the partition's) |
| ``__key`` | string | the message key (null when the producer set none) |
| ``__messageId`` | string | ``ledger:entry:partition:batch`` (-1: not partitioned / not batched) |
| ``__publishTime`` | timestamp | when the broker received it |
| ``__eventTime`` | timestamp | the producer's event time, null when not set |
| ``__properties`` | map<string,string> | the message properties |

``__messageId`` is unique within a topic and can be used in ``startingOffsets`` / ``endingOffsets``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

SCHEMA_DDL = (
    "value binary, __topic string, __key string, __messageId string, "
    "__publishTime timestamp, __eventTime timestamp, __properties map<string,string>"
)
COLUMNS = ("value", "__topic", "__key", "__messageId", "__publishTime", "__eventTime", "__properties")


def arrow_schema() -> pa.Schema:
    """The Arrow schema Spark expects for :data:`SCHEMA_DDL` (UTC timestamps in microseconds)."""
    import pyarrow as pa

    timestamp = pa.timestamp("us", tz="UTC")
    return pa.schema(
        [
            pa.field("value", pa.binary()),
            pa.field("__topic", pa.string()),
            pa.field("__key", pa.string()),
            pa.field("__messageId", pa.string()),
            pa.field("__publishTime", timestamp),
            pa.field("__eventTime", timestamp),
            pa.field("__properties", pa.map_(pa.string(), pa.string())),
        ]
    )

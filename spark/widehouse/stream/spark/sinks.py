"""Idempotent sinks of one micro-batch: ClickHouse (dedup tokens) and Delta (txnAppId/txnVersion).

A replayed micro-batch (same app, group and batch id after a crash) changes nothing:

- **ClickHouse**: every insert carries ``insert_deduplication_token = <app>:<group>:<batch>:<table>``
  and the tables keep a deduplication window, so the engine drops data it has already stored.
  The insert runs on the driver: the partial rows are already collapsed per (key, hour), and an
  embedded chDB engine lives only in the driver process.
- **Delta**: appends with ``txnAppId = <app>:<group>:<table>`` and ``txnVersion = <batch>``; Delta
  skips a version it has already committed for that app id.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from widehouse.errors import ClickHouseError

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame


@dataclass(frozen=True)
class BatchIdentity:
    """Who writes: the app, the slot group and the micro-batch (the idempotency key)."""

    app: str
    group: str
    batch_id: int

    def token(self, table: str) -> str:
        return f"{self.app}:{self.group}:{self.batch_id}:{table}"

    def txn_app_id(self, table: str) -> str:
        return f"{self.app}:{self.group}:{table}"


class SerializedClient:
    """A ClickHouse client shared by the foreachBatch threads of several queries: one call at a time."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._lock = threading.Lock()

    def insert_arrow(self, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return self._client.insert_arrow(*args, **kwargs)

    def command(self, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return self._client.command(*args, **kwargs)

    def query(self, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return self._client.query(*args, **kwargs)


class FaultInjected(ClickHouseError):  # noqa: N818 - reads as what happened
    """Raised by a deliberately injected failure (tests of the exactly-once guarantees)."""


def insert_clickhouse(client: Any, table: str, data: pa.Table, identity: BatchIdentity) -> int:
    """Insert one batch's rows of ``table`` with the batch's deduplication token. Returns the rows.

    One insert per table and batch: the token then names exactly this data whatever the block
    size, so a replay after a crash is skipped as a whole. (Splitting client-side would tie the
    tokens to a block size; a restart with another size would duplicate rows.) ClickHouse splits
    very large inserts itself, deterministically, and deduplicates each of its blocks.
    """
    if data.num_rows == 0:
        return 0
    client.insert_arrow(
        table,
        data,
        settings={"insert_deduplicate": 1, "insert_deduplication_token": identity.token(table)},
    )
    return int(data.num_rows)


def append_delta(
    df: DataFrame, path: str, identity: BatchIdentity, table: str, partition_by: list[str]
) -> None:
    """Append to a Delta table, skipped by Delta when this (txnAppId, txnVersion) is already there.

    New columns (a catalog that gained a column) are merged into the table's schema.
    """
    (
        df.write.format("delta")
        .mode("append")
        .option("txnAppId", identity.txn_app_id(table))
        .option("txnVersion", identity.batch_id)
        .option("mergeSchema", "true")
        .partitionBy(*partition_by)
        .save(path)
    )

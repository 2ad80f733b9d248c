"""The Delta sink of one micro-batch: appends keyed by ``txnAppId``/``txnVersion``.

A replayed micro-batch (same app, group and batch id after a crash) changes nothing: appends carry
``txnAppId = <app>:<group>:<table>`` and ``txnVersion = <batch>``, and Delta skips a version it has
already committed for that app id. (The ClickHouse half is :meth:`widehouse.clickhouse.ClickHouse.insert`
with the batch's deduplication token.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from widehouse.stream.progress import BatchIdentity


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

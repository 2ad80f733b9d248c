"""What a group's Spark checkpoint holds, read through the cluster's file system (no Spark job)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def last_planned_batch(spark: SparkSession, checkpoint: str) -> int | None:
    """The largest batch id in the checkpoint's offset log (``offsets/<n>``); None when there is none."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    path = jvm.org.apache.hadoop.fs.Path(f"{checkpoint.rstrip('/')}/offsets")
    fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    if not fs.exists(path):
        return None
    ids = [int(name) for name in (s.getPath().getName() for s in fs.listStatus(path)) if name.isdigit()]
    return max(ids) if ids else None

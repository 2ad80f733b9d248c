"""Per-topic rows and lag of a micro-batch, for the job's progress table.

The channel is Spark's own offset log: before a micro-batch runs, Spark writes its end offsets to
``<checkpoint>/offsets/<batchId>``, and every partition entry of this source records the index the
batch started from, the index it ends at, and the broker's last index when the batch was planned.
So inside ``foreachBatch(df, batch_id)`` the job calls::

    metrics = batch_metrics(spark, checkpoint_location, batch_id)

and gets one :class:`TopicBatchMetrics` per topic (rows in the batch, lag after it), exact, without
touching the data or the broker, and the same again if the batch is replayed after a crash.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from widehouse.errors import PulsarError
from widehouse.pulsar.offsets import SourceOffset, TopicBatchMetrics, topic_metrics

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["BatchLog", "TopicBatchMetrics", "batch_metrics", "offsets_from_log", "read_batch_log"]


def offsets_from_log(text: str, app_id: str | None = None) -> SourceOffset:
    """This source's end offset in the text of an offset log file (``v1``, metadata, one line per
    source). With several pulsar sources in one query, ``app_id`` picks one."""
    found: list[SourceOffset] = []
    for raw in text.splitlines()[2:]:
        line = raw.strip()
        if not line.startswith("{"):
            continue
        try:
            data: Any = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict) and "pulsar" in data:
            offset = SourceOffset.from_json(data)
            if app_id is None or offset.app == app_id:
                found.append(offset)
    if not found:
        raise PulsarError(f"no pulsar source offset{f' of app {app_id}' if app_id else ''} in the offset log")
    if len(found) > 1:
        apps = ", ".join(sorted(o.app for o in found))
        raise PulsarError(f"several pulsar sources in the offset log ({apps}); pass app_id")
    return found[0]


def read_text(spark: SparkSession, path: str) -> str:
    """A small text file through Hadoop's file system (local, HDFS, S3 ... as the cluster has)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    fs = hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    stream = fs.open(hadoop_path)
    try:
        data = jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
    finally:
        stream.close()
    return str(data)


@dataclass(frozen=True)
class BatchLog:
    """What the offset log says about one micro-batch."""

    metrics: list[TopicBatchMetrics]
    """Rows and lag per topic."""
    planned_ms: int | None
    """When Spark planned the batch (``batchTimestampMs``), if the log records it."""


def read_batch_log(
    spark: SparkSession, checkpoint_location: str, batch_id: int, app_id: str | None = None
) -> BatchLog:
    """Per-topic metrics and planning time of micro-batch ``batch_id``, from one read of its log."""
    path = f"{checkpoint_location.rstrip('/')}/offsets/{batch_id}"
    try:
        text = read_text(spark, path)
    except Exception as exc:  # py4j wraps the JVM's FileNotFoundException
        raise PulsarError(f"cannot read the offset log {path}: {exc}") from exc
    return BatchLog(topic_metrics(offsets_from_log(text, app_id)), _planned_ms(text))


def batch_metrics(
    spark: SparkSession, checkpoint_location: str, batch_id: int, app_id: str | None = None
) -> list[TopicBatchMetrics]:
    """Rows and lag per topic of micro-batch ``batch_id`` of the query checkpointed there."""
    return read_batch_log(spark, checkpoint_location, batch_id, app_id).metrics


def _planned_ms(text: str) -> int | None:
    """The log's ``batchTimestampMs`` (its second line is the batch metadata), or None."""
    try:
        return int(json.loads(text.splitlines()[1])["batchTimestampMs"])
    except (IndexError, ValueError, KeyError, TypeError):
        return None

"""Per-topic rows and lag of a micro-batch, for the job's progress table.

The channel is Spark's own offset log: before a micro-batch runs, Spark writes its end offsets to
``<checkpoint>/offsets/<batchId>``, and every partition entry of this source records the index the
batch started from, the index it ends at, and the broker's last index when the batch was planned.
So inside ``foreachBatch(df, batch_id)`` the job calls (:mod:`widehouse.source.spark` reads the
file through the cluster's file system)::

    metrics = batch_metrics(spark, checkpoint_location, batch_id)

and gets one :class:`TopicBatchMetrics` per topic (rows in the batch, lag after it), exact, without
touching the data or the broker, and the same again if the batch is replayed after a crash.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from widehouse.errors import PulsarError
from widehouse.source.offsets import SourceOffset, TopicBatchMetrics, topic_metrics

__all__ = ["BatchLog", "TopicBatchMetrics", "batch_log", "offsets_from_log"]


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


@dataclass(frozen=True)
class BatchLog:
    """What the offset log says about one micro-batch."""

    metrics: list[TopicBatchMetrics]
    """Rows and lag per topic."""
    planned_ms: int | None
    """When Spark planned the batch (``batchTimestampMs``), if the log records it."""


def batch_log(text: str, app_id: str | None = None) -> BatchLog:
    """What the text of one offset log file says: per-topic metrics and the planning time."""
    return BatchLog(topic_metrics(offsets_from_log(text, app_id)), planned_ms(text))


def planned_ms(text: str) -> int | None:
    """The log's ``batchTimestampMs`` (its second line is the batch metadata), or None."""
    try:
        return int(json.loads(text.splitlines()[1])["batchTimestampMs"])
    except (IndexError, ValueError, KeyError, TypeError):
        return None

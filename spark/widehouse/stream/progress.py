"""Progress rows of a micro-batch and the group's watermark (pure; no Spark).

Per batch, one row per topic that had data or lag (rows in / out, quarantined, late, lag, max
event time, publish-time range) and one group row (topic ``*``) with the totals. Every row carries
the group's **watermark**: a publish-time frontier before which every message has been written. A
topic with no lag after the batch is caught up to the batch's planning time (minus a small
allowance for producer clocks and batching); a topic with lag only to the newest message this batch
read, and not at all while one of its lagging partitions read nothing this batch (admission gave
its turn to other partitions: the newest message of the others says nothing about it). The group's
watermark is the minimum over its topics; the hourly job waits for it to pass an
hour's end plus the lateness (an event of that hour published later is late by definition).

The rows' shape is :data:`widehouse.contracts.tables.PROGRESS_SHAPE`.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass
from typing import Any

from widehouse.contracts.tables import GROUP_ROW
from widehouse.source.offsets import TopicBatchMetrics
from widehouse.stream.merge import TopicStats

PUBLISH_ALLOWANCE_MS = 10_000
"""Producer clocks and client-side batching: a message stamped before T may reach the broker after."""


@dataclass(frozen=True)
class BatchIdentity:
    """Who writes: the app, the slot group and the micro-batch (the idempotency key of every sink)."""

    app: str
    group: str
    batch_id: int

    def token(self, table: str) -> str:
        """The ClickHouse insert deduplication token of this batch's rows of ``table``."""
        return f"{self.app}:{self.group}:{self.batch_id}:{table}"

    def txn_app_id(self, table: str) -> str:
        """The Delta ``txnAppId`` of this group's writes to ``table`` (the version is the batch id)."""
        return f"{self.app}:{self.group}:{table}"


def progress_rows(
    identity: BatchIdentity,
    stats: dict[str, TopicStats],
    metrics: list[TopicBatchMetrics],
    planned_ms: int,
    started: float,
) -> list[dict[str, Any]]:
    """Progress rows: one per topic that had data or lag, then the group row (topic ``*``)."""
    utc = dt.UTC
    now = dt.datetime.now(utc)
    batch_time = dt.datetime.fromtimestamp(planned_ms / 1000, utc)
    lag_of = {m.topic: m.lag for m in metrics}
    rows_of = {m.topic: m.rows for m in metrics}
    waiting = {m.topic for m in metrics if m.waiting}
    topics = sorted(set(lag_of) | set(stats))
    rows: list[dict[str, Any]] = []
    frontiers: list[dt.datetime] = []
    caught_up = batch_time - dt.timedelta(milliseconds=PUBLISH_ALLOWANCE_MS)

    def at(ms: int | None) -> dt.datetime | None:
        return None if ms is None else dt.datetime.fromtimestamp(ms / 1000, utc)

    for topic in topics:
        s = stats.get(topic)
        lag = int(lag_of.get(topic, 0))
        max_publish = at(s.max_publish_ms) if s else None
        known = max_publish if topic not in waiting else None
        frontier = caught_up if lag == 0 else (known or dt.datetime.fromtimestamp(0, utc))
        frontiers.append(min(frontier, caught_up))
        if not s and lag == 0:
            continue
        rows.append(
            {
                "app": identity.app,
                "group": identity.group,
                "batch_id": identity.batch_id,
                "topic": topic,
                "rows_in": s.rows_in if s else int(rows_of.get(topic, 0)),
                "rows_out": s.good if s else 0,
                "bad": s.bad if s else 0,
                "late": s.late if s else 0,
                "lag": lag,
                "max_event_time": at(s.max_event_ms) if s else None,
                "min_publish_time": at(s.min_publish_ms) if s else None,
                "max_publish_time": max_publish,
                "batch_time": batch_time,
                "committed_at": now,
                "duration_ms": int((time.time() - started) * 1000),
                "watermark": None,
            }
        )
    watermark = min(frontiers) if frontiers else caught_up
    for row in rows:
        row["watermark"] = watermark

    def total(name: str) -> int:
        return sum(int(r[name]) for r in rows)

    rows.append(
        {
            "app": identity.app,
            "group": identity.group,
            "batch_id": identity.batch_id,
            "topic": GROUP_ROW,
            "rows_in": total("rows_in"),
            "rows_out": total("rows_out"),
            "bad": total("bad"),
            "late": total("late"),
            "lag": sum(int(v) for v in lag_of.values()),
            "max_event_time": max((r["max_event_time"] for r in rows if r["max_event_time"]), default=None),
            "min_publish_time": min(
                (r["min_publish_time"] for r in rows if r["min_publish_time"]), default=None
            ),
            "max_publish_time": max(
                (r["max_publish_time"] for r in rows if r["max_publish_time"]), default=None
            ),
            "batch_time": batch_time,
            "committed_at": now,
            "duration_ms": int((time.time() - started) * 1000),
            "watermark": watermark,
        }
    )
    return rows

"""Watermark events: each slot group announces its committed watermark on a control topic.

After a micro-batch's sinks and progress rows are committed, the group publishes one JSON message
to ``WIDEHOUSE_STREAM_CONTROL_TOPIC`` (default ``persistent://widehouse/control/watermarks``; its
tenant gets the ``WIDEHOUSE_TENANT_SUFFIX`` like the catalog's topics, :func:`control_topic`)::

    {"kind": "watermark", "app": "widehouse", "group": "g001", "batch_id": 42,
     "watermark_ms": 1795856400000, "topics": ["persistent://..."], "committed_at_ms": ...}

``watermark_ms`` is the group row's watermark of :mod:`widehouse.stream.progress` (the same value
the progress table holds), ``topics`` the group's topics, so a reader can tell which tables the
group feeds without the plan. Key ``<app>/<group>``: with topic compaction a reader of the compacted
view sees the newest event per group. Producer name ``wh-control.<app>.<group>``, sequence id = batch
id: with deduplication on the control namespace a replayed batch adds nothing; without it a replay
repeats an event, which readers treat as idempotent (they keep the highest watermark per group).

A failed publish only logs a warning: the progress table stays the truth (the polling sensor reads
it), and the next batch publishes a newer watermark. An idle group publishes nothing (Spark runs no
micro-batch), exactly as its progress does not advance.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from widehouse.contracts.tables import GROUP_ROW
from widehouse.errors import PulsarError
from widehouse.pulsar.topics import TopicName
from widehouse.settings import StreamSettings
from widehouse.stream.producers import Outgoing, Producers

log = logging.getLogger("widehouse.stream")

KIND = "watermark"


@dataclass(frozen=True)
class WatermarkEvent:
    """One group's committed watermark after one batch."""

    app: str
    group: str
    batch_id: int
    watermark_ms: int
    topics: tuple[str, ...]
    committed_at_ms: int = 0

    @property
    def watermark(self) -> dt.datetime:
        return dt.datetime.fromtimestamp(self.watermark_ms / 1000, dt.UTC)

    def to_json(self) -> bytes:
        return orjson.dumps(
            {
                "kind": KIND,
                "app": self.app,
                "group": self.group,
                "batch_id": self.batch_id,
                "watermark_ms": self.watermark_ms,
                "topics": list(self.topics),
                "committed_at_ms": self.committed_at_ms,
            }
        )

    @classmethod
    def from_json(cls, data: bytes | str) -> WatermarkEvent:
        """Parse an event; a :class:`ValueError` says what is wrong (readers skip such messages)."""
        try:
            raw = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise ValueError(f"not JSON: {data[:80]!r}") from exc
        if not isinstance(raw, dict) or raw.get("kind") != KIND:
            raise ValueError(f"not a watermark event: {str(raw)[:120]}")
        try:
            return cls(
                app=str(raw["app"]),
                group=str(raw["group"]),
                batch_id=int(raw["batch_id"]),
                watermark_ms=int(raw["watermark_ms"]),
                topics=tuple(str(t) for t in raw["topics"]),
                committed_at_ms=int(raw.get("committed_at_ms", 0)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"watermark event lacks or mistypes {exc}: {str(raw)[:120]}") from exc


def event_from_progress(
    app: str, group: str, batch_id: int, topics: Sequence[str], progress: Sequence[Mapping[str, Any]]
) -> WatermarkEvent:
    """The event of a batch from its progress rows (the group row carries the watermark)."""
    row = next((r for r in progress if r["topic"] == GROUP_ROW), None)
    if row is None:
        raise ValueError(f"group {group} batch {batch_id}: progress has no group row ({GROUP_ROW!r})")
    mark = row["watermark"]
    moment = mark if mark.tzinfo else mark.replace(tzinfo=dt.UTC)
    return WatermarkEvent(
        app, group, batch_id, int(moment.timestamp() * 1000), tuple(sorted(topics)), int(time.time() * 1000)
    )


def control_topic(stream: StreamSettings) -> str | None:
    """The control topic of a deployment: the setting, moved to tenant ``<tenant>-<suffix>`` when
    ``WIDEHOUSE_TENANT_SUFFIX`` relocates the catalog (a test or staging deployment never writes to
    the production control topic). None when watermark events are off."""
    if not stream.control_topic:
        return None
    if not stream.tenant_suffix:
        return stream.control_topic
    name = TopicName.parse(stream.control_topic)
    return str(TopicName(name.domain, f"{name.tenant}-{stream.tenant_suffix}", name.namespace, name.local))


def producer_name(app: str, group: str) -> str:
    return f"wh-control.{app}.{group}"


@dataclass
class WatermarkPublisher:
    """Publishes a group's committed watermark after each batch (never fails the batch)."""

    producers: Producers
    topic: str
    app: str
    group: str
    topics: tuple[str, ...]

    def publish(self, progress: Sequence[Mapping[str, Any]], batch_id: int) -> WatermarkEvent | None:
        """Send the batch's event; returns it, or None when publishing failed (logged)."""
        event = event_from_progress(self.app, self.group, batch_id, self.topics, progress)
        message = Outgoing(
            batch_id,
            event.to_json(),
            {"wh_app": self.app, "wh_group": self.group, "wh_kind": KIND},
            key=f"{self.app}/{self.group}",
        )
        try:
            self.producers.guarantee(self.topic)
            self.producers.send(self.topic, producer_name(self.app, self.group), [message])
        except PulsarError as exc:  # the progress table holds the watermark; the next batch retries
            log.warning("group %s batch %d: watermark event not published: %s", self.group, batch_id, exc)
            return None
        return event

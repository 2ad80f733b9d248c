"""What a slot group publishes to Pulsar after each committed micro-batch (no Spark).

:class:`StreamPublishers` belongs to a stream app (one Pulsar client for all its groups);
:meth:`StreamPublishers.for_group` gives the batch writer its ``after_commit`` hook, called once
the batch's sinks and progress rows are written:

1. the quarantined messages to their dead-letter topics (``WIDEHOUSE_STREAM_DEAD_LETTER``,
   :mod:`widehouse.stream.deadletter`); a failure fails the batch (Spark replays it);
2. the group's committed watermark to the control topic (``WIDEHOUSE_STREAM_CONTROL_TOPIC``,
   :mod:`widehouse.stream.control`); a failure is logged only.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from widehouse.errors import PulsarError
from widehouse.pulsar.topics import TopicName
from widehouse.settings import Settings
from widehouse.stream.control import WatermarkPublisher, control_topic
from widehouse.stream.deadletter import DeadLetterPublisher
from widehouse.stream.producers import Producers

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger("widehouse.stream")


@dataclass(frozen=True)
class AfterCommit:
    """The ``after_commit`` hook of one group's batch writer."""

    dead_letters: DeadLetterPublisher | None
    watermarks: WatermarkPublisher | None

    def __call__(self, quarantine: pa.Table, progress: Sequence[Mapping[str, Any]], batch_id: int) -> None:
        if self.dead_letters is not None and quarantine.num_rows:
            sent = self.dead_letters.publish(quarantine, batch_id)
            if sent:
                log.info("batch %d: dead letters %s", batch_id, sent)
        if self.watermarks is not None:
            self.watermarks.publish(progress, batch_id)


@dataclass
class StreamPublishers:
    """The app's Pulsar side channels (created lazily; :meth:`close` when the app stops)."""

    settings: Settings
    producers: Producers = field(init=False)
    _ensured: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.producers = Producers(self.settings.pulsar)

    def _ensure_control_namespace(self, topic: str) -> None:
        """Create the control topic's namespace, with deduplication on, if missing (once; a failure
        is logged: events are optional)."""
        with self._lock:
            if self._ensured:
                return
            self._ensured = True
            from widehouse.pulsar.admin import PulsarAdmin
            from widehouse.pulsar.dedup import enable_deduplication

            name = TopicName.parse(topic)
            namespace = name.full_namespace
            try:
                with PulsarAdmin(self.settings.pulsar) as admin:
                    tenant_exists = name.tenant in admin.tenants()
                    if not tenant_exists or namespace not in admin.namespaces(name.tenant):
                        admin.ensure_namespace(namespace)
                        enable_deduplication(admin, namespace)  # ours: one event per batch
            except PulsarError as exc:  # watermark events are optional; the progress table is the truth
                log.warning(
                    "control namespace %s not ensured (watermark events may fail): %s", namespace, exc
                )

    def for_group(self, group: str, topics: Sequence[str]) -> AfterCommit | None:
        """The group's hook, or None when neither side channel is on."""
        stream = self.settings.stream
        dead = DeadLetterPublisher(self.producers, stream.app, group) if stream.dead_letter else None
        marks = None
        topic = control_topic(stream)
        if topic:
            self._ensure_control_namespace(topic)
            marks = WatermarkPublisher(self.producers, topic, stream.app, group, tuple(topics))
        if dead is None and marks is None:
            return None
        return AfterCommit(dead, marks)

    def close(self) -> None:
        self.producers.close()

"""Deduplicated, unbatched Pulsar producers for what the stream publishes besides its sinks.

The stream publishes two small side channels after a micro-batch is committed: quarantined
messages to dead-letter topics (:mod:`widehouse.stream.deadletter`) and the group's watermark to
the control topic (:mod:`widehouse.stream.control`). Both are exactly once across replays through
Pulsar's broker-side deduplication: a producer name per (app, group, channel) and a sequence id
derived from the batch id, so a replayed batch re-sends the same ids and the broker drops them.

Producers here never batch. The broker remembers only the *first* sequence id of a batch entry
(see the sink's notes in NOTES.md), so a batch cut differently on replay could slip a duplicate
through; unbatched, every message is its own entry and deduplication is exact per message. The
volumes are small (the quarantined share of a batch; one watermark per batch), so the ~10x lower
per-producer send rate of unbatched messages does not matter.

Before sending, a producer's ``last_sequence_id()`` (what the broker stored for the name) skips
what a previous attempt already stored, so a replay sends nothing; the broker would drop it anyway.
Deduplication must be enabled for the target namespaces (``widehouse pulsar dedup --enable NS``);
:meth:`Producers.guarantee` tells, and without it a replay duplicates (at-least-once).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from widehouse.errors import PulsarError
from widehouse.settings import PulsarSettings

log = logging.getLogger("widehouse.stream")

SEQUENCE_BITS = 32
"""Sequence id = ``(batch id << 32) + index``: 4 billion messages per batch, increasing across batches."""


def sequence_id(batch_id: int, index: int) -> int:
    """The sequence id of the ``index``-th message a batch publishes on one producer."""
    if batch_id < 0 or not 0 <= index < 1 << SEQUENCE_BITS:
        raise ValueError(f"sequence id out of range: batch {batch_id}, index {index}")
    return (batch_id << SEQUENCE_BITS) + index


@dataclass(frozen=True)
class Outgoing:
    """One message to publish with an explicit sequence id."""

    sequence_id: int
    payload: bytes
    properties: dict[str, str]
    key: str | None = None
    event_time_ms: int | None = None


@dataclass
class Producers:
    """One Pulsar client and its producers, by (topic, producer name), shared by a stream app.

    Thread-safe: groups' batches run on separate threads; each call holds the lock while it sends
    (the volumes are small).
    """

    pulsar: PulsarSettings
    connect: Callable[[PulsarSettings], Any] | None = None
    """Client factory (``widehouse.pulsar.client.connect`` unless given)."""
    send_timeout_seconds: float = 120.0
    _client: Any = None
    _producers: dict[tuple[str, str], Any] = field(default_factory=dict)
    _dedup: dict[str, tuple[bool, float]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _client_(self) -> Any:
        if self._client is None:
            if self.connect is None:
                from widehouse.pulsar.client import connect

                self._client = connect(self.pulsar)
            else:
                self._client = self.connect(self.pulsar)
        return self._client

    def _producer(self, topic: str, name: str) -> Any:
        found = self._producers.get((topic, name))
        if found is None:
            try:
                found = self._client_().create_producer(
                    topic,
                    producer_name=name,
                    batching_enabled=False,
                    send_timeout_millis=int(self.send_timeout_seconds * 1000),
                    block_if_queue_full=True,
                )
            except Exception as exc:  # the C++ client raises its own exception types
                from widehouse.pulsar.client import explain

                raise explain(f"cannot create producer {name!r} on {topic}", exc, self.pulsar) from exc
            self._producers[(topic, name)] = found
        return found

    def guarantee(self, topic: str) -> bool:
        """Whether the broker deduplicates ``topic`` (asked once per 5 minutes per topic); logs a
        warning naming the topic when it does not (a replay then duplicates)."""
        now = time.monotonic()
        cached = self._dedup.get(topic)
        if cached is not None and now - cached[1] < 300:
            return cached[0]
        from widehouse.pulsar.admin import PulsarAdmin
        from widehouse.pulsar.dedup import deduplication

        try:
            with PulsarAdmin(self.pulsar) as admin:
                found = deduplication(admin, topic)
        except PulsarError as exc:  # the answer only decides a warning; never fail the batch on it
            log.warning("cannot tell whether the broker deduplicates %s: %s", topic, exc)
            return False
        if not found.enabled:
            log.warning("%s", found.advice())
        self._dedup[topic] = (found.enabled, now)
        return found.enabled

    def send(self, topic: str, name: str, messages: Iterable[Outgoing]) -> int:
        """Publish ``messages`` (ascending sequence ids) on producer ``name`` of ``topic`` and wait
        until the broker stored them. Skips ids the broker already holds for the name. Returns how
        many were sent. On failure the producer is closed (a retry starts from the broker's state)
        and a :class:`PulsarError` names the topic."""
        with self._lock:
            producer = self._producer(topic, name)
            sent = 0
            failures: list[str] = []

            def done(result: Any, _message_id: Any) -> None:
                if str(result) not in {"Ok", "Result.Ok"}:  # pulsar.Result.Ok
                    failures.append(str(result))

            try:
                stored = producer.last_sequence_id()
                for message in messages:
                    if message.sequence_id <= stored:
                        continue
                    producer.send_async(
                        message.payload,
                        done,
                        properties=message.properties,
                        partition_key=message.key,
                        sequence_id=message.sequence_id,
                        event_timestamp=message.event_time_ms,
                    )
                    sent += 1
                producer.flush()
                if failures:
                    raise PulsarError(f"{len(failures)} of {sent} messages failed: {failures[0]}")
            except Exception as exc:  # the C++ client raises its own exception types
                self._drop(topic, name)
                from widehouse.pulsar.auth import client_error

                # an expired token (the broker drops the connection, sends time out) is said as such
                refused = client_error(f"publishing to {topic} as {name!r}", exc, self.pulsar)
                if refused is not None:
                    raise refused from exc
                raise PulsarError(f"publishing to {topic} as {name!r} failed: {exc}") from exc
            return sent

    def _drop(self, topic: str, name: str) -> None:
        producer = self._producers.pop((topic, name), None)
        if producer is not None:
            try:
                producer.close()
            except Exception as exc:  # closing a broken producer must not hide the first error
                log.debug("closing producer %s on %s: %s", name, topic, exc)

    def close(self) -> None:
        with self._lock:
            for topic, name in list(self._producers):
                self._drop(topic, name)
            if self._client is not None:
                self._client.close()
                self._client = None

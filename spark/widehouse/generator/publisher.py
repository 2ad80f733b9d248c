"""Publish generated chunks to Pulsar fast: one batching producer per topic partition, async sends.

- Routing: a key always goes to the same partition (``crc32(key) % partitions``), and the key is
  set as the message's partition key, so consumers see it as ``__key``.
- ``send_async`` through the C++ client's message builder, without a Python callback per message
  (a callback costs a GIL round trip per message and halves the rate); every 1024th message and the
  last one carry a callback that records failures, ``send_timeout_millis=0`` makes the client retry
  until the broker acknowledges, and ``flush`` waits for everything (and raises on failure).
- Batches flush every 100 ms (or 1000 messages): with one producer per partition, 10 ms timers
  made the broker write thousands of tiny entries per second and cut the rate by ~3x.
- Pacing: messages are sent no earlier than they are due; the largest lateness behind schedule is
  recorded, because event times are computed from the schedule.
"""

from __future__ import annotations

import logging
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from widehouse.generator.badinput import LABEL_PROPERTY
from widehouse.generator.core import Chunk
from widehouse.pulsar import client as pulsar_client
from widehouse.pulsar.topics import TopicName
from widehouse.settings import PulsarSettings

_log = logging.getLogger("widehouse.generator")
CALLBACK_EVERY = 1024
PACE_CHECK_EVERY = 64


@dataclass
class PublishStats:
    sent: int = 0
    failed: int = 0
    max_lag_ms: int = 0
    first_error: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def failure(self, message: str) -> None:
        with self._lock:
            self.failed += 1
            if self.first_error is None:
                self.first_error = message


class Publisher:
    """Producers for ``topics`` (partition counts as created in Pulsar); not thread-safe."""

    def __init__(
        self,
        settings: PulsarSettings,
        topics: list[TopicName],
        partitions: list[int],
        *,
        batch_max_messages: int = 1000,
        batch_delay_ms: int = 100,
        max_pending: int = 5000,
    ) -> None:
        import _pulsar
        import pulsar

        self._builder = _pulsar.MessageBuilder
        self._ok = _pulsar.Result.Ok
        self.stats = PublishStats()
        # connect() gives the C++ client its own console logger (never a Python one: see its module)
        self.client = pulsar_client.connect(settings, io_threads=1)
        self.producers: list[list[Any]] = []
        self._raw: list[list[Any]] = []
        try:
            for topic, count in zip(topics, partitions, strict=True):
                targets = topic.partitions(count)
                producers = [
                    self.client.create_producer(
                        str(target),
                        batching_enabled=True,
                        batching_max_messages=batch_max_messages,
                        batching_max_allowed_size_in_bytes=1024 * 1024,
                        batching_max_publish_delay_ms=batch_delay_ms,
                        max_pending_messages=max_pending,
                        block_if_queue_full=True,
                        send_timeout_millis=0,
                        compression_type=pulsar.CompressionType.LZ4,
                    )
                    for target in targets
                ]
                self.producers.append(producers)
                self._raw.append([p._producer for p in producers])  # the C++ producer: no per-call checks
        except Exception as exc:
            self.client.close()
            raise pulsar_client.explain(f"cannot create producers for {topic}", exc, settings) from exc
        self._partition_cache: dict[tuple[int, str], int] = {}

    def _callback(self, result: Any, _message_id: Any) -> None:
        if result != self._ok:
            self.stats.failure(str(result))

    def send(self, chunk: Chunk, start: float | None, tick: Callable[[int], None] | None = None) -> None:
        """Send a chunk; with ``start`` (monotonic seconds), no message before start + its offset.

        ``tick`` is told the messages sent so far every ``PACE_CHECK_EVERY`` (a chunk paced at a low rate
        takes long)."""
        builder, raw, stats = self._builder, self._raw, self.stats
        cache = self._partition_cache
        topics, keys, payloads, labels, offsets = (
            chunk.topics,
            chunk.keys,
            chunk.payloads,
            chunk.labels,
            chunk.offsets_ms,
        )
        sent = stats.sent
        for j in range(len(payloads)):
            if j % PACE_CHECK_EVERY == 0:
                if tick is not None:
                    tick(sent)
                if start is not None:
                    due = start + offsets[j] / 1000.0
                    now = time.monotonic()
                    if due > now:
                        time.sleep(due - now)
                    elif (lag := int((now - due) * 1000)) > stats.max_lag_ms:
                        stats.max_lag_ms = lag
            topic = topics[j]
            key = keys[j]
            producers = raw[topic]
            if len(producers) == 1:
                producer = producers[0]
            else:
                slot = cache.get((topic, key))
                if slot is None:
                    slot = cache[(topic, key)] = zlib.crc32(key.encode()) % len(producers)
                producer = producers[slot]
            message = builder().content(payloads[j]).partition_key(key)
            label = labels[j]
            if label is not None:
                message.property(LABEL_PROPERTY, label)
            sent += 1
            producer.send_async(message.build(), self._callback if sent % CALLBACK_EVERY == 0 else None)
        stats.sent = sent

    def flush(self) -> None:
        for producers in self.producers:
            for producer in producers:
                try:
                    producer.flush()
                except Exception as exc:  # the client raises its own exception types
                    self.stats.failure(f"{producer.topic()}: {exc}")

    def close(self) -> None:
        try:
            self.flush()
        finally:
            for producers in self.producers:
                for producer in producers:
                    try:
                        producer.close()
                    except Exception as exc:  # closing after a broker failure may raise too
                        _log.warning("closing the producer of %s failed: %s", producer.topic(), exc)
            self.client.close()

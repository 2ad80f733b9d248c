"""Executor side of the ``pulsar`` sink: one write task's Arrow batches to Pulsar, exactly once.

**Exactly once** rests on the broker's deduplication (:mod:`widehouse.pulsar.dedup`): the broker
keeps, per topic partition and producer name, the highest sequence id it stored and drops any
message whose sequence id is not higher. So every message gets a name and a sequence id that a
replay reproduces exactly:

- producer name ``<prefix>-<run>-<partition>``: ``run`` is the streaming query's id (kept in its
  checkpoint, so a restarted query has the same one) or, for a batch write, an id drawn once per
  write on the driver; ``partition`` is the Spark partition id of the task;
- sequence id ``(batch id << 32) + row index`` (the row's position in the task; batch writes use
  batch id 0), so it grows across micro-batches for the same producer name.

A replayed micro-batch or a retried task creates its producers with the same names; the broker
answers with the last sequence id it holds for each, rows up to it are skipped here (the broker
would drop them too, but a producer batch that *starts* at or below that id is dropped whole, so
skipping keeps batches from straddling it) and the rest is sent. This requires the replayed batch
to hold the same rows in the same partitions in the same order, which holds for the ``pulsar``
source followed by narrow transformations (a shuffle does not promise the order).

Partitioned topics get one producer per partition, routed here, deterministically: a key goes to
``crc32(key) % partitions`` (as the generator routes), a keyless row to ``row index % partitions``.
The C++ client's own routers are not deterministic across runs for keyless messages.

Producers are created inside the task (one client per worker process, shared with the source's
readers), send asynchronously in batches, at most ``maxProducersPerTask`` stay open (least
recently used closed first, which is safe: sequence ids only grow), and all are flushed and closed
at the end of the task so the next batch's task, wherever it runs, can take the same names.
"""

from __future__ import annotations

import logging
import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from widehouse.errors import PulsarError
from widehouse.pulsar.dedup import Deduplication, deduplication
from widehouse.source.sink_options import SinkOptions

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger("widehouse.pulsar.sink")

SEQUENCE_BITS = 32
MAX_BATCH_ID = (1 << (63 - SEQUENCE_BITS)) - 1
CALLBACK_EVERY = 1024
_CREATE_RETRY_S = 60.0
_DEDUP_TTL_S = 300.0
_DEDUP_CACHE: dict[tuple[str, str], tuple[Deduplication, float]] = {}
_DEDUP_LOCK = threading.Lock()
_WARNED: set[str] = set()


@dataclass(frozen=True)
class WriteIdentity:
    """Who writes: the run (query id or batch-write id), micro-batch (None: batch write) and partition."""

    run: str
    batch_id: int | None
    partition: int

    def producer_name(self, prefix: str) -> str:
        return f"{prefix}-{self.run}-{self.partition}"

    @property
    def base_sequence(self) -> int:
        batch = self.batch_id or 0
        if not 0 <= batch <= MAX_BATCH_ID:
            raise PulsarError(f"micro-batch id {batch} is out of the sink's range 0..{MAX_BATCH_ID}")
        return batch << SEQUENCE_BITS


@dataclass
class SinkReport:
    """What one task wrote (the commit message's content)."""

    rows: int = 0
    sent: int = 0
    skipped: int = 0
    """Rows a previous attempt had already stored (replay / retry), not sent again."""
    per_topic: dict[str, int] = field(default_factory=dict)
    at_least_once: list[str] = field(default_factory=list)
    """Topics written without broker deduplication."""


class _Target:
    """One topic: its partitions' producers (created lazily), and their skip marks."""

    def __init__(self, topic: str, partitions: list[str]) -> None:
        self.topic = topic
        self.partitions = partitions


class _Producers:
    """The task's producers: LRU-bounded, each with the last sequence id the broker had for its name."""

    def __init__(self, client: Any, options: SinkOptions, identity: WriteIdentity) -> None:
        import _pulsar

        self.client = client
        self.options = options
        self.name = identity.producer_name(options.producer_prefix)
        self.open: OrderedDict[str, tuple[Any, int]] = OrderedDict()
        self.targets: dict[str, _Target] = {}
        self.failures: list[str] = []
        self._ok = _pulsar.Result.Ok
        self._busy = _pulsar.Result.ProducerBusy

    def target(self, topic: str) -> _Target:
        target = self.targets.get(topic)
        if target is None:
            try:
                partitions = list(self.client.get_topic_partitions(topic))
            except Exception as exc:  # the C++ client raises its own exception types
                raise PulsarError(f"cannot look up topic {topic}: {exc}") from exc
            target = self.targets[topic] = _Target(topic, partitions or [topic])
        return target

    def get(self, partition_topic: str) -> tuple[Any, int]:
        entry = self.open.get(partition_topic)
        if entry is not None:
            self.open.move_to_end(partition_topic)
            return entry
        while len(self.open) >= self.options.max_producers:
            _topic, (old, _last) = self.open.popitem(last=False)
            self._close(old)
        producer = self._create(partition_topic)
        entry = self.open[partition_topic] = (producer, producer.last_sequence_id())
        return entry

    def _create(self, topic: str) -> Any:
        import _pulsar

        conf = _pulsar.ProducerConfiguration()
        conf.producer_name(self.name)
        conf.batching_enabled(True)
        conf.batching_max_messages(self.options.batch_max_messages)
        conf.batching_max_allowed_size_in_bytes(1024 * 1024)
        conf.batching_max_publish_delay_ms(self.options.batch_delay_ms)
        conf.max_pending_messages(self.options.max_pending)
        conf.block_if_queue_full(True)
        conf.send_timeout_millis(0)  # retry until the broker acknowledges
        conf.compression_type(getattr(_pulsar.CompressionType, self.options.compression))
        deadline = time.monotonic() + _CREATE_RETRY_S
        while True:
            try:
                return self.client.create_producer(topic, conf)
            except Exception as exc:  # the C++ client raises its own exception types
                # the same name still attached: a killed attempt whose connection the broker has not
                # dropped yet; it goes within seconds
                if "Busy" in type(exc).__name__ + str(exc) and time.monotonic() < deadline:
                    time.sleep(1.0)
                    continue
                raise PulsarError(f"cannot create producer {self.name} on {topic}: {exc}") from exc

    def callback(self, result: Any, _message_id: Any) -> None:
        if result != self._ok:
            self.failures.append(str(result))

    def _close(self, producer: Any) -> None:
        try:
            producer.flush()
        except Exception as exc:  # the client raises its own exception types
            self.failures.append(f"{producer.topic()}: {exc}")
        try:
            producer.close()
        except Exception as exc:  # closing after a broker failure may raise too
            log.warning("closing the producer of %s failed: %s", producer.topic(), exc)

    def close(self) -> None:
        while self.open:
            _topic, (producer, _last) = self.open.popitem(last=False)
            self._close(producer)


def write_batches(  # noqa: PLR0912, PLR0915 (the per-row loop stays inline: the hot path)
    batches: Iterable[pa.RecordBatch], options: SinkOptions, identity: WriteIdentity
) -> SinkReport:
    """Send every row of the task's batches (see the module docstring); returns what was written."""
    import _pulsar

    from widehouse.source.options import ReadConfig
    from widehouse.source.reader import client_for

    client = client_for(ReadConfig(options.pulsar.service_url, options.pulsar.auth_token))
    producers = _Producers(client, options, identity)
    report = SinkReport()
    builder = _pulsar.MessageBuilder
    base = identity.base_sequence
    checked: set[str] = set()
    index = 0
    try:
        for batch in batches:
            values, topics, keys, events, props = _columns(batch, options)
            for j in range(batch.num_rows):
                topic = topics[j] if topics is not None else None
                topic = topic or options.topic
                if topic is None:
                    raise PulsarError(
                        f"row {index} of partition {identity.partition} has a null __topic and "
                        "the sink has no topic option"
                    )
                if topic not in checked:
                    _check_dedup(options, topic, report)
                    checked.add(topic)
                target = producers.target(topic)
                key = keys[j] if keys is not None else None
                count = len(target.partitions)
                if count == 1:
                    partition_topic = target.partitions[0]
                elif key is not None:
                    partition_topic = target.partitions[zlib.crc32(key.encode()) % count]
                else:
                    partition_topic = target.partitions[index % count]
                producer, last = producers.get(partition_topic)
                sequence = base + index
                index += 1
                report.per_topic[topic] = report.per_topic.get(topic, 0) + 1
                if sequence <= last:
                    report.skipped += 1
                    continue
                message = builder().sequence_id(sequence)
                value = values[j]
                if value is None:
                    message.set_null_value()
                else:
                    message.content(value)
                if key is not None:
                    message.partition_key(key)
                if events is not None and events[j] is not None:
                    message.event_timestamp(events[j])
                if props is not None and props[j]:
                    message.properties(dict(props[j]))
                report.sent += 1
                callback = producers.callback if report.sent % CALLBACK_EVERY == 0 else _ignore
                producer.send_async(message.build(), callback)
    finally:
        producers.close()
    report.rows = index
    if producers.failures:
        raise PulsarError(
            f"{len(producers.failures)} send(s) of producer {producers.name} failed, "
            f"first: {producers.failures[0]}"
        )
    return report


def _ignore(_result: Any, _message_id: Any) -> None:
    pass


def _columns(
    batch: pa.RecordBatch, options: SinkOptions
) -> tuple[list[Any], list[Any] | None, list[Any] | None, list[Any] | None, list[Any] | None]:
    """The batch's columns as Python lists (event times in epoch ms); absent columns are None."""
    import pyarrow as pa
    import pyarrow.compute as pc

    names = batch.schema.names

    def column(name: str) -> pa.Array | None:
        return batch.column(names.index(name)) if name in names else None

    value = column("value")
    if value is None:
        raise PulsarError("the pulsar sink got a batch without a value column")
    if pa.types.is_string(value.type) or pa.types.is_large_string(value.type):
        value = value.cast(pa.binary())
    topic, key, event, props = (
        column("__topic"),
        column("__key"),
        column("__eventTime"),
        column("__properties"),
    )
    events = None
    if event is not None:  # epoch ms, whatever the unit and zone (Spark sends microseconds, UTC)
        per_ms = {"s": 0, "ms": 1, "us": 1000, "ns": 1_000_000}[event.type.unit]
        raw = event.cast(pa.int64())
        millis = pc.multiply(raw, 1000) if per_ms == 0 else pc.floor(pc.divide(raw, per_ms))
        events = millis.cast(pa.int64()).to_pylist()
    return (
        value.to_pylist(),
        topic.to_pylist() if topic is not None else None,
        key.to_pylist() if key is not None else None,
        events,
        props.to_pylist() if props is not None else None,
    )


def _check_dedup(options: SinkOptions, topic: str, report: SinkReport) -> None:
    """Refuse (``requireExactlyOnce``) or note and warn once when ``topic`` is not deduplicated."""
    status = topic_deduplication(options, topic)
    if status.enabled:
        return
    report.at_least_once.append(topic)
    if options.require_exactly_once:
        raise PulsarError(f"requireExactlyOnce=true refuses to write: {status.advice()}")
    if topic not in _WARNED:
        _WARNED.add(topic)
        log.warning("pulsar sink: %s", status.advice())


def topic_deduplication(options: SinkOptions, topic: str) -> Deduplication:
    """The topic's deduplication setting, cached in the process for five minutes."""
    key = (options.pulsar.admin_url, topic)
    now = time.monotonic()
    with _DEDUP_LOCK:
        cached = _DEDUP_CACHE.get(key)
        if cached is not None and now - cached[1] < _DEDUP_TTL_S:
            return cached[0]
    from widehouse.pulsar.admin import PulsarAdmin

    with PulsarAdmin(options.pulsar) as admin:
        status = deduplication(admin, topic)
    with _DEDUP_LOCK:
        _DEDUP_CACHE[key] = (status, now)
    return status

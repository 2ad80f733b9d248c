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

**Producer batches are part of the contract.** The broker remembers a *batch's first* sequence
id only (the C++ client sends no highest id for a batch; measured: 20 messages in batches of 7,
the reopened producer reported the first id of the last batch), so a replay must know where each
stored batch ended. The sink therefore cuts batches itself, deterministically: a producer's batch
ends after ``batchingMaxMessages`` messages, before a message that would take it past 1 MiB, and
when the producer is closed (LRU eviction, end of the task); the client's timer is set to a day so
it never cuts one. A replay (same rows, same routing, same evictions) forms the same batches, so
with the broker's last id ``L`` for a producer name: rows below ``L`` and the batch that starts at
``L`` are skipped, the rest is sent. A task that fails closes its producers *without* flushing
(the client then drops the unfinished batch), so only whole batches are ever stored.

This requires the replayed batch to hold the same rows in the same partitions in the same order,
which holds for the ``pulsar`` source followed by narrow transformations (a shuffle does not
promise the order); a replay that differs is logged.

Partitioned topics get one producer per partition, routed here, deterministically: a key goes to
``crc32(key) % partitions`` (as the generator routes), a keyless row to ``row index % partitions``.
The C++ client's own routers are not deterministic across runs for keyless messages.

Producers are created inside the task (one client per worker process, shared with the source's
readers), send asynchronously, at most ``maxProducersPerTask`` stay open (least recently used
closed first), and all are closed at the end of the task so the next batch's task, wherever it
runs, can take the same names.
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

from widehouse.contracts.periods import DAY_MS
from widehouse.errors import PulsarError
from widehouse.pulsar.dedup import Deduplication, deduplication
from widehouse.source.sink_options import SinkOptions

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger("widehouse.pulsar.sink")

SEQUENCE_BITS = 32
MAX_BATCH_ID = (1 << (63 - SEQUENCE_BITS)) - 1
CALLBACK_EVERY = 1024
BATCH_BYTES = 1024 * 1024
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
    """One topic and its partition topics."""

    def __init__(self, topic: str, partitions: list[str]) -> None:
        self.topic = topic
        self.partitions = partitions


class _Open:
    """An open producer: the broker's last sequence id for its name, and its current batch."""

    __slots__ = ("count", "last", "producer", "size", "skipping")

    def __init__(self, producer: Any, last: int) -> None:
        self.producer = producer
        self.last = last
        self.count = 0
        self.size = 0
        self.skipping = False
        """The current batch is the one the broker already holds (it starts at ``last``)."""


class _Producers:
    """The task's producers: LRU-bounded, each with the last sequence id the broker had for its name."""

    def __init__(self, client: Any, options: SinkOptions, identity: WriteIdentity) -> None:
        import _pulsar

        self.client = client
        self.options = options
        self.name = identity.producer_name(options.producer_prefix)
        self.open: OrderedDict[str, _Open] = OrderedDict()
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

    def get(self, partition_topic: str) -> _Open:
        entry = self.open.get(partition_topic)
        if entry is not None:
            self.open.move_to_end(partition_topic)
            return entry
        while len(self.open) >= self.options.max_producers:
            _topic, old = self.open.popitem(last=False)
            self._close(old.producer, flush=True)  # ends its batch: a replay evicts at the same row
        producer = self._create(partition_topic)
        entry = self.open[partition_topic] = _Open(producer, producer.last_sequence_id())
        return entry

    def _create(self, topic: str) -> Any:
        import _pulsar

        conf = _pulsar.ProducerConfiguration()
        conf.producer_name(self.name)
        conf.batching_enabled(True)
        conf.batching_max_messages(self.options.batch_max_messages)
        conf.batching_max_allowed_size_in_bytes(4 * BATCH_BYTES)  # never reached: cut at BATCH_BYTES
        conf.batching_max_publish_delay_ms(DAY_MS)  # batches are cut by count, size and close only
        conf.max_pending_messages(max(self.options.max_pending, 2 * self.options.batch_max_messages))
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
                from widehouse.pulsar.client import explain

                raise explain(
                    f"cannot create producer {self.name} on {topic}", exc, self.options.pulsar
                ) from exc

    def callback(self, result: Any, _message_id: Any = None) -> None:
        if result != self._ok:
            self.failures.append(str(result))

    def _close(self, producer: Any, flush: bool) -> None:
        if flush:
            try:
                producer.flush()
            except Exception as exc:  # the client raises its own exception types
                self.failures.append(f"{producer.topic()}: {exc}")
        try:
            producer.close()  # without a flush the unfinished batch is dropped, not sent
        except Exception as exc:  # closing after a broker failure may raise too
            log.warning("closing the producer of %s failed: %s", producer.topic(), exc)

    def close(self, flush: bool) -> None:
        while self.open:
            _topic, entry = self.open.popitem(last=False)
            self._close(entry.producer, flush)


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
    batch_max = options.batch_max_messages
    checked: set[str] = set()
    index = 0
    ok = False
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
                slot = producers.get(partition_topic)
                value = values[j]
                prop = props[j] if props is not None else None
                size = 64 + (len(value) if value is not None else 0) + (len(key) if key is not None else 0)
                if prop:
                    size += sum(len(k) + len(v) for k, v in prop)
                if slot.count and slot.size + size > BATCH_BYTES:  # cut before: the batch is full
                    if not slot.skipping:
                        slot.producer.flush_async(producers.callback)
                    slot.count = slot.size = 0
                    slot.skipping = False
                sequence = base + index
                index += 1
                report.per_topic[topic] = report.per_topic.get(topic, 0) + 1
                if sequence == slot.last:  # the broker's last batch of this name starts here
                    if slot.count:
                        log.warning(
                            "pulsar sink: the replay of %s differs from what it replays on %s "
                            "(a stored batch starts mid-batch); exactly-once is not assured",
                            producers.name,
                            partition_topic,
                        )
                    slot.skipping = True
                slot.count += 1
                slot.size += size
                if sequence < slot.last or slot.skipping:
                    report.skipped += 1
                else:
                    message = builder().sequence_id(sequence)
                    if value is None:
                        message.set_null_value()
                    else:
                        message.content(value)
                    if key is not None:
                        message.partition_key(key)
                    if events is not None and events[j] is not None:
                        message.event_timestamp(events[j])
                    if prop:
                        message.properties(dict(prop))
                    report.sent += 1
                    callback = producers.callback if report.sent % CALLBACK_EVERY == 0 else None
                    slot.producer.send_async(message.build(), callback)
                if slot.count >= batch_max:  # the client cuts here by itself
                    slot.count = slot.size = 0
                    slot.skipping = False
        ok = True
    finally:
        producers.close(flush=ok)
    report.rows = index
    if producers.failures:
        raise PulsarError(
            f"{len(producers.failures)} send(s) of producer {producers.name} failed, "
            f"first: {producers.failures[0]}"
        )
    return report


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

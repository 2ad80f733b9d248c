"""Executor side: read the slices of one task into chunks of column lists (:mod:`.messages`).

The ``pulsar`` format turns each chunk into an Arrow record batch (:func:`read_task`); the stream's
own source folds the chunks as they are (:func:`read_messages`). A message's id is taken only where
it is needed (see :func:`_read_slice` and :class:`widehouse.source.messages.Messages`).

Each slice gets its own Pulsar reader (a non-durable cursor: nothing is left on the broker when it
closes). Readers of the next few slices are created asynchronously while the current one is
drained, so a task of many small slices does not pay one round trip per slice. A reader starts
just after the slice's start (or at the earliest message) and the slice ends after exactly
``count`` messages (the broker index says how many there are); messages outside ``(start, end]``
are skipped, so the same slice always yields the same rows.

If messages are missing (deleted by retention, topic recreated), the slice ends early and the
loss is reported: an error with ``failOnDataLoss``, a warning otherwise.

One Pulsar client per Python worker process is kept (workers are reused across tasks), and so
are the readers of the last slices read (up to 2048, closed after 3 minutes unused, or within 15 s of
losing their connection, as when their topic is deleted): a reader whose slice ended exactly where
the next batch's slice of that partition starts carries on, prefetched queue included, instead of
subscribing again (a stream of small batches over many partitions spends most of its read time
creating readers otherwise). Spark hands a task to any idle Python worker, so
with two workers a partition's kept reader is often one batch behind; if it is at most
``_CATCH_UP_MAX`` messages behind (the broker index says how many), it reads on through them, as
messages before its slice are skipped anyway: skipping a message costs microseconds, a new reader
a broker round trip and most of a millisecond of CPU.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Generator, Iterator
from contextlib import closing
from typing import TYPE_CHECKING, Any

from widehouse.errors import PulsarError
from widehouse.pulsar.positions import Mark
from widehouse.source.broker import DataLossError
from widehouse.source.messages import Messages, message_key
from widehouse.source.options import ReadConfig
from widehouse.source.planning import ReadTask, Slice
from widehouse.source.schema import arrow_schema

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger("widehouse.pulsar.source")

_CLIENTS: dict[tuple[str, str | None], Any] = {}
_CLIENTS_LOCK = threading.Lock()
_OPEN_AHEAD = 64
_POLL_MS = 500
_MIN_QUEUE = 100
_KEPT_MAX = 2048
_KEPT_IDLE_S = 180.0
_SWEEP_S = 15.0
_CATCH_UP_MAX = 500
_KEPT: OrderedDict[tuple[str, str | None, str], tuple[Any, Mark, float]] = OrderedDict()
"""Readers kept between tasks: (service, token, partition) -> (reader, mark consumed through, kept at)."""
_KEPT_LOCK = threading.Lock()
_JANITOR: list[threading.Thread] = []


def _kept_key(config: ReadConfig, piece: Slice) -> tuple[str, str | None, str]:
    return (config.service_url, config.auth_token, piece.tp.name)


def _take_kept(config: ReadConfig, piece: Slice) -> Any:
    """The kept reader of this partition if it stopped at the slice's start or a little before, else None."""
    if piece.start.position is None:
        return None
    with _KEPT_LOCK:
        kept = _KEPT.pop(_kept_key(config, piece), None)
    if kept is None:
        return None
    reader, through, _kept_at = kept
    if through.position is not None and (
        through.position.key() == piece.start.position.key()
        or (
            through.position.key() < piece.start.position.key()
            and 0 < piece.start.index - through.index <= _CATCH_UP_MAX
        )
    ):
        return reader  # at the slice's start, or a little behind it (the slice skips the gap)
    reader.close_async(_ignore)
    return None


def _keep(config: ReadConfig, piece: Slice, reader: Any) -> None:
    assert piece.end.position is not None
    key = _kept_key(config, piece)
    closing = []
    with _KEPT_LOCK:
        replaced = _KEPT.pop(key, None)
        if replaced is not None:  # another reader of this partition (a query restarted elsewhere)
            closing.append(replaced[0])
        _KEPT[key] = (reader, piece.end, time.monotonic())
        while len(_KEPT) > _KEPT_MAX:
            _key, (old, _through, _kept_at) = _KEPT.popitem(last=False)
            closing.append(old)
        if not _JANITOR:
            _JANITOR.append(
                threading.Thread(target=_close_idle, name="widehouse-pulsar-readers", daemon=True)
            )
            _JANITOR[0].start()
    for old in closing:
        old.close_async(_ignore)


def _close_idle() -> None:
    """The janitor of the kept readers: :func:`_sweep` every ``_SWEEP_S`` seconds."""
    while True:
        time.sleep(_SWEEP_S)
        _sweep(time.monotonic())


def _sweep(now: float) -> int:
    """Close the kept readers nobody used for ``_KEPT_IDLE_S`` (the query stopped, or the partition
    moved) and those no longer connected; returns how many were closed.

    A reader whose topic was deleted is not connected: its client would look the topic up again
    and again, an error in the log each time, until the idle cutoff. A reader cut off by a broker
    restart is closed too, and the partition's next slice subscribes anew.
    """
    cutoff = now - _KEPT_IDLE_S
    with _KEPT_LOCK:
        stale = [
            key
            for key, (reader, _through, kept_at) in _KEPT.items()
            if kept_at < cutoff or not reader.is_connected()
        ]
        readers = [_KEPT.pop(key)[0] for key in stale]
    for reader in readers:
        reader.close_async(_ignore)
    return len(readers)


def close_kept() -> int:
    """Close every reader this process keeps, and wait for each; returns how many.

    For a process about to delete the topics it read (a benchmark's tenants) or done reading: a
    kept reader of a deleted topic would look it up again and again until the janitor's next sweep.
    """
    import _pulsar

    with _KEPT_LOCK:
        readers = [reader for reader, _through, _kept_at in _KEPT.values()]
        _KEPT.clear()
    for reader in readers:
        try:
            reader.close()
        except _pulsar.PulsarException as exc:  # already closed or cut off: nothing left to release
            log.debug("closing a kept reader: %s", exc)
    return len(readers)


def _ignore(_result: Any) -> None:
    pass


def client_for(config: ReadConfig) -> Any:
    """The process's raw ``_pulsar.Client`` for this service URL and token."""
    key = (config.service_url, config.auth_token)
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(key)
        if client is None:
            from widehouse.pulsar.client import connect
            from widehouse.settings import PulsarSettings

            settings = PulsarSettings(config.service_url, "http://unused", config.auth_token)
            client = connect(settings, io_threads=2)._client
            _CLIENTS[key] = client
        return client


class _Opener:
    """Creates the readers of a task's slices a few slices ahead, asynchronously."""

    def __init__(self, client: Any, slices: tuple[Slice, ...], config: ReadConfig) -> None:
        self.client = client
        self.slices = slices
        self.config = config
        self.results: dict[int, Any] = {}
        self.events: dict[int, threading.Event] = {}
        self.issued = 0

    def _issue_until(self, end: int) -> None:
        import _pulsar

        while self.issued < min(end, len(self.slices)):
            i = self.issued
            piece = self.slices[i]
            event = threading.Event()
            self.events[i] = event
            self.issued += 1
            kept = _take_kept(self.config, piece)
            if kept is not None:
                self.results[i] = kept
                event.set()
                continue
            conf = _pulsar.ReaderConfiguration()
            # at least a small queue: the reader may be kept and carry on with the next batch
            conf.receiver_queue_size(min(self.config.receiver_queue_size, max(_MIN_QUEUE, piece.count)))
            if piece.start.position is None:
                start = _pulsar.MessageId.earliest
                conf.start_message_id_inclusive(True)
            else:
                p = piece.start.position
                start = _pulsar.MessageId(piece.partition, p.ledger, p.entry, p.batch)

            def done(result: Any, reader: Any, i: int = i, event: threading.Event = event) -> None:
                self.results[i] = reader if result == _pulsar.Result.Ok else result
                event.set()

            self.client.create_reader_async(piece.tp.name, start, conf, done)

    def reader(self, i: int) -> Any:
        self._issue_until(i + _OPEN_AHEAD)
        if not self.events[i].wait(self.config.read_timeout_ms / 1000):
            from widehouse.pulsar.auth import expired_error

            subject = f"creating a reader on {self.slices[i].tp}"
            expired = expired_error(subject, self.config.auth_token)  # the handshake kept failing
            if expired is not None:
                raise expired
            raise PulsarError(f"{subject} timed out")
        result = self.results.pop(i)
        if not hasattr(result, "read_next"):
            from widehouse.pulsar.auth import client_error
            from widehouse.settings import PulsarSettings

            subject = f"cannot read {self.slices[i].tp}"
            settings = PulsarSettings(self.config.service_url, "http://unused", self.config.auth_token)
            refused = client_error(subject, result, settings)  # e.g. the token expired while running
            if refused is not None:
                raise refused
            raise PulsarError(f"{subject}: {result}")
        return result

    def close(self) -> None:
        """Close readers created ahead and never used (an aborted task)."""
        for i in range(self.issued):
            if self.events[i].wait(5) and hasattr(self.results.get(i), "close_async"):
                self.results.pop(i).close_async(_ignore)


class _Chunks:
    """The chunk being filled (:class:`Messages`); ``take`` hands it out and starts a new one."""

    def __init__(self) -> None:
        self.current = Messages()

    def take(self) -> Messages:
        chunk, self.current = self.current, Messages()
        return chunk


def read_task(task: ReadTask, config: ReadConfig) -> Iterator[pa.RecordBatch]:
    """Arrow batches of every message of the task's slices, in slice order (the ``pulsar`` format)."""
    schema = arrow_schema()
    with closing(read_messages(task, config)) as chunks:  # an abandoned read closes its readers now
        for chunk in chunks:
            yield chunk.to_batch(schema)


def read_messages(task: ReadTask, config: ReadConfig) -> Generator[Messages, None, None]:
    """Every message of the task's slices, in slice order, in chunks of at most ``arrow_batch_rows``
    (the stream's transform folds these lists as they are: no Arrow batch, no message id unless a
    row needs one)."""
    client = client_for(config)
    opener = _Opener(client, task.slices, config)
    chunks = _Chunks()
    try:
        for i, piece in enumerate(task.slices):
            reader = opener.reader(i)
            complete = False
            try:
                complete = yield from _read_slice(reader, piece, chunks, config)
            finally:
                if complete:
                    _keep(config, piece, reader)
                else:
                    reader.close_async(_ignore)
        if len(chunks.current):
            yield chunks.take()
    finally:
        opener.close()


def _first_past(messages: list[Any], low: int, end_key: tuple[int, int, int]) -> int | None:
    """The index of the first of ``messages[low:]`` past ``end_key``, or None if none is.

    The messages of one reader come in their partition's order, so the last one says whether any is
    past the end, and a binary search finds the first: a few ids per chunk, not one per message."""
    high = len(messages) - 1
    if high < low or message_key(messages[high]) <= end_key:
        return None
    while low < high:  # messages[high] is past the end
        middle = (low + high) // 2
        if message_key(messages[middle]) > end_key:
            high = middle
        else:
            low = middle + 1
    return high


def _read_slice(  # noqa: PLR0912, PLR0915 (the per-message loop stays inline: the hot path)
    reader: Any, piece: Slice, chunks: _Chunks, config: ReadConfig
) -> Generator[Messages, None, bool]:
    """Append the slice's messages to ``chunks`` (yielding full chunks); True if all were read.

    A message is in the slice when ``start < (ledger, entry, batch) <= end``. A reader hands out its
    partition's messages in order, so ids are taken only where the order leaves a doubt: each message
    until the first past the start (a reader resumes at the start entry, a kept one may be a little
    behind), and the last message of every run of reads (if it is past the end, the first past it is
    searched for, and it and the rest are dropped: the slice lost messages)."""
    import _pulsar

    expected = piece.count
    start, end = piece.start, piece.end
    start_key = start.position.key() if start.position is not None else (-1, -1, -1)
    end_key = end.position.key() if end.position is not None else (-1, -1, -1)
    before_start = start.position is not None  # from the earliest message on, nothing is before it
    got = 0
    run_start = len(chunks.current)
    waited_since: float | None = None
    lost_reason = ""
    read_next, timeout = reader.read_next, _pulsar.Timeout
    metadata = config.metadata
    while got < expected:
        # bound appends: this loop runs once per message (about 0.1 µs each saved)
        columns = chunks.current
        values, messages = columns.values, columns.messages
        add_value, add_publish, add_message = values.append, columns.publish_ms.append, messages.append
        add_key, add_event = columns.keys.append, columns.event.append
        prop_offsets, prop_keys, prop_values = columns.prop_offsets, columns.prop_keys, columns.prop_values
        room = min(expected - got, config.arrow_batch_rows - len(values))
        first = len(values)
        filled = 0
        while filled < room:
            try:
                msg = read_next(_POLL_MS)
            except timeout:
                break
            if before_start:
                if message_key(msg) <= start_key:
                    continue  # before the slice (a reader resumes at the start entry)
                before_start = False
            add_message(msg)
            add_value(msg.data())
            add_publish(msg.publish_timestamp())
            if metadata:
                add_key(msg.partition_key())
                add_event(msg.event_timestamp())
                props = msg.properties()
                if props:
                    prop_keys.extend(props.keys())
                    prop_values.extend(props.values())
                prop_offsets.append(len(prop_keys))
            filled += 1
        past = _first_past(messages, first, end_key) if filled else None
        if past is not None:
            key = message_key(messages[past])
            lost_reason = f"reached {key[0]}:{key[1]}:{key[2]}, past the end"
            columns.truncate(past)
            filled = past - first
        got += filled
        waited_since = None if filled else waited_since
        if lost_reason:
            break
        if filled < room:  # the poll timed out
            now = time.monotonic()
            waited_since = waited_since or now
            if not reader.has_message_available():
                lost_reason = "the topic has no more messages"
                break
            if (now - waited_since) * 1000 > config.read_timeout_ms:
                raise PulsarError(
                    f"reading {piece.tp}: no message for {config.read_timeout_ms} ms while "
                    f"{expected - got} more were expected up to {end.encode_position()}"
                )
            continue
        if len(values) >= config.arrow_batch_rows:
            columns.runs.append((piece.topic, piece.partition, len(values) - run_start))
            yield chunks.take()
            run_start = 0
    if len(chunks.current) > run_start:
        chunks.current.runs.append((piece.topic, piece.partition, len(chunks.current) - run_start))
    if got < expected:
        message = (
            f"{piece.tp}: {expected - got} of {expected} messages between "
            f"{start.encode_position()} and {end.encode_position()} are gone ({lost_reason})"
        )
        if config.fail_on_data_loss:
            raise DataLossError(f"data loss: {message}; set failOnDataLoss=false to go on without them")
        log.warning("data loss: %s (failOnDataLoss=false: going on)", message)
        return False
    return True

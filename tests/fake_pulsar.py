"""Stand-ins for the Pulsar client's message and reader objects, for pure-logic tests of the read
loop and of the transform over its chunks: they answer what the client's objects answer and count
how often a message was asked for its id (what the read path must not do for every message).

Tests of the source against the broker use the real client (tests/integration); these only let a
unit test see which messages had their id taken.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

    from widehouse.source.messages import Messages


class FakeMessageId:
    def __init__(self, ledger: int, entry: int, batch: int) -> None:
        self._parts = (ledger, entry, batch)

    def ledger_id(self) -> int:
        return self._parts[0]

    def entry_id(self) -> int:
        return self._parts[1]

    def batch_index(self) -> int:
        return self._parts[2]


class FakeMessage:
    """A message at ``(ledger, entry, batch)``; ``id_calls`` counts ``message_id()``."""

    def __init__(
        self,
        ledger: int,
        entry: int,
        batch: int = -1,
        data: bytes = b"{}",
        publish_ms: int = 1_700_000_000_000,
        key: str = "",
        event_ms: int = 0,
        properties: dict[str, str] | None = None,
    ) -> None:
        self.position = (ledger, entry, batch)
        self._data = data
        self._publish_ms = publish_ms
        self._key = key
        self._event_ms = event_ms
        self._properties = properties or {}
        self.id_calls = 0

    def message_id(self) -> FakeMessageId:
        self.id_calls += 1
        return FakeMessageId(*self.position)

    def data(self) -> bytes:
        return self._data

    def publish_timestamp(self) -> int:
        return self._publish_ms

    def partition_key(self) -> str:
        return self._key

    def event_timestamp(self) -> int:
        return self._event_ms

    def properties(self) -> dict[str, str]:
        return dict(self._properties)


class FakeReader:
    """Hands out ``messages`` in order, then times out (``_pulsar.Timeout``) with nothing available."""

    def __init__(self, messages: Iterable[FakeMessage]) -> None:
        self.messages = list(messages)
        self.read = 0

    def read_next(self, _timeout_ms: int) -> FakeMessage:
        import _pulsar

        if self.read >= len(self.messages):
            raise _pulsar.Timeout("no message")
        self.read += 1
        return self.messages[self.read - 1]

    def has_message_available(self) -> bool:
        return self.read < len(self.messages)

    def close_async(self, callback: Callable[[Any], None]) -> None:
        callback(None)


def id_calls(messages: Iterable[FakeMessage]) -> dict[tuple[int, int, int], int]:
    """Position -> how often its id was taken, for the messages whose id was taken at all."""
    return {m.position: m.id_calls for m in messages if m.id_calls}


def partition_of(topic: str) -> int:
    """Any partition number per topic (ids must carry the run's partition): :func:`message_chunks`'."""
    return sum(map(ord, topic)) % 7


def message_chunks(batch: pa.RecordBatch, rows: int, ledger: int) -> tuple[list[Messages], list[FakeMessage]]:
    """The source's Arrow rows as the read loop hands them out: chunks of ``rows``, a run per stretch
    of one topic; message ``i`` sits at ``ledger:i`` (its partition's order is the batch's), on
    partition :func:`partition_of` its topic."""
    import pyarrow as pa

    from widehouse.source.messages import Messages

    values = batch["value"].to_pylist()
    topics = batch["__topic"].to_pylist()
    publish_us = batch["__publishTime"].cast(pa.int64()).to_pylist()
    messages = [FakeMessage(ledger, i) for i in range(len(values))]
    chunks = []
    for low in range(0, len(values), rows):
        chunk = Messages()
        for i in range(low, min(low + rows, len(values))):
            chunk.values.append(values[i])
            chunk.publish_ms.append(publish_us[i] // 1000)
            chunk.messages.append(messages[i])
            topic, partition = topics[i], partition_of(topics[i])
            if chunk.runs and chunk.runs[-1][:2] == (topic, partition):
                chunk.runs[-1] = (topic, partition, chunk.runs[-1][2] + 1)
            else:
                chunk.runs.append((topic, partition, 1))
        chunks.append(chunk)
    return chunks, messages

"""Stand-ins for the Pulsar client's message and reader objects, for pure-logic tests of the read
loop and of the transform over its chunks: they answer what the client's objects answer and count
how often a message was asked for its id (what the read path must not do for every message).

Tests of the source against the broker use the real client (tests/integration); these only let a
unit test see which messages had their id taken.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any


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

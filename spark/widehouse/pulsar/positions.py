"""Where a message sits in a Pulsar topic-partition: positions, entries, consumed marks.

Inside one topic-partition a message sits at ``(ledger, entry, batch index)``; the broker also stamps
every entry with a per-partition **index** (``AppendIndexMetadataInterceptor``): the running number
of the entry's last message.

- :class:`TopicPartition`: a topic and a partition number.
- :class:`Position`: ``L:E`` is a whole entry, ``L:E:B`` is "up to and including batch index B".
- :class:`EntryInfo`: what the broker says about one entry (position, index, message count).
- :class:`Mark`: what has been consumed: a position (or none: earliest) and the index of the last
  consumed message.

Pure values: used by the admin client and by the Spark source (:mod:`widehouse.source.offsets`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from widehouse.pulsar.topics import PARTITION_SUFFIX, TopicName

EARLIEST = "earliest"
_WHOLE_ENTRY = 1 << 62  # sorts after every batch index of the same entry


class TopicPartition(NamedTuple):
    """A topic (its full base name) and a partition number, ``-1`` for a non-partitioned topic."""

    topic: str
    partition: int

    @property
    def name(self) -> str:
        """The topic name a client subscribes to: ``<topic>-partition-<n>`` or the topic itself."""
        return self.topic if self.partition < 0 else f"{self.topic}{PARTITION_SUFFIX}{self.partition}"

    @classmethod
    def of(cls, name: str) -> TopicPartition:
        """Split a listed topic name (``...-partition-3`` or a plain topic)."""
        return cls(*_split(name))

    def __str__(self) -> str:
        return self.name


@lru_cache(maxsize=1 << 16)
def _split(name: str) -> tuple[str, int]:
    """``(base topic, partition or -1)`` of a topic name, kept: a source splits every listed name of
    its namespaces at every trigger (thousands with many topics)."""
    parsed = TopicName.parse(name)
    index = parsed.partition_index
    return str(parsed.base), -1 if index is None else index


@dataclass(frozen=True, order=True)
class Position:
    """``(ledger, entry, batch)``; ``batch == -1`` means the whole entry."""

    ledger: int
    entry: int
    batch: int = -1

    def key(self) -> tuple[int, int, int]:
        """Sort key of the last message this position covers."""
        return (self.ledger, self.entry, self.batch if self.batch >= 0 else _WHOLE_ENTRY)

    def __str__(self) -> str:
        if self.batch >= 0:
            return f"{self.ledger}:{self.entry}:{self.batch}"
        return f"{self.ledger}:{self.entry}"

    @classmethod
    def parse(cls, text: str) -> Position:
        parts = text.split(":")
        if len(parts) not in (2, 3):
            raise ValueError(f"{text!r} is not a position (ledger:entry[:batch])")
        numbers = [int(p) for p in parts]
        return cls(*numbers)


def message_key(ledger: int, entry: int, batch: int) -> tuple[int, int, int]:
    """Sort key of one message (``batch`` is -1 for a message that is not part of a batch)."""
    return (ledger, entry, batch)


@dataclass(frozen=True)
class Mark:
    """Consumed through ``position`` (None: nothing consumed, read from the earliest message);
    ``index`` is the broker index of the last consumed message (first index - 1 for earliest)."""

    position: Position | None
    index: int

    @property
    def is_earliest(self) -> bool:
        return self.position is None

    def encode_position(self) -> str:
        return EARLIEST if self.position is None else str(self.position)

    def covers(self, ledger: int, entry: int, batch: int) -> bool:
        """True if the message was consumed by this mark (so a reader starting here skips it)."""
        if self.position is None:
            return False
        return message_key(ledger, entry, batch) <= self.position.key()


@dataclass(frozen=True)
class EntryInfo:
    """What the broker says about one entry: where it is, its index, how many messages it holds."""

    position: Position
    index: int
    """Broker index of the entry's last message."""
    messages: int = 1

    @property
    def first_index(self) -> int:
        return self.index - self.messages + 1

    @property
    def mark(self) -> Mark:
        """The mark of having consumed this whole entry."""
        return Mark(Position(self.position.ledger, self.position.entry), self.index)

"""Positions and offsets of the Pulsar source, JSON-safe and exact.

Inside one topic-partition a message sits at ``(ledger, entry, batch index)``; the broker also stamps
every entry with a per-partition **index** (``AppendIndexMetadataInterceptor``): the running number
of the entry's last message. With the index, the number of messages between two positions is a
subtraction, without reading them.

- :class:`Position` is a place in a partition: ``L:E`` is a whole entry (every message of a batch
  entry), ``L:E:B`` is "up to and including batch index B" of entry ``L:E``.
- :class:`Mark` is what has been consumed: a position (or ``earliest``: nothing yet) and the index
  of the last consumed message. A micro-batch reads ``(start mark, end mark]``.
- :class:`PartitionOffset` is one partition's entry in a source offset: the end mark, the index
  the batch started from, the last index the broker had when the batch was planned (lag), and the
  start mark when the previous offset did not have the partition (new partition, first batch).
- :class:`SourceOffset` is what Spark checkpoints: ``{"pulsar": 1, "app": ..., "topics": {topic:
  {partition: entry}}}`` with each entry a compact string (see :meth:`PartitionOffset.encode`).

The position values themselves live in :mod:`widehouse.pulsar.positions` (the admin client
uses them too) and are re-exported here. Everything here is pure (no client, no Spark) so it is
unit-tested directly.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from widehouse.errors import ConfigError, PulsarError
from widehouse.pulsar.positions import EARLIEST, Mark, Position, TopicPartition
from widehouse.source.option_text import topic_entries

FORMAT_VERSION = 1
LATEST = "latest"


def _decode_position(text: str) -> Position | None:
    return None if text == EARLIEST else Position.parse(text)


@dataclass(frozen=True)
class PartitionOffset:
    """One partition in a source offset (see the module docstring)."""

    mark: Mark
    start_index: int
    latest: int
    start: Position | Literal["previous"] | None = "previous"
    """Where the batch started when the previous offset lacked the partition; ``"previous"``
    otherwise. ``None`` is the earliest message."""

    @property
    def rows(self) -> int:
        return self.mark.index - self.start_index

    @property
    def lag(self) -> int:
        return max(0, self.latest - self.mark.index)

    @property
    def start_mark(self) -> Mark | None:
        """The recorded start mark, or None when the batch starts at the previous offset."""
        if self.start == "previous":
            return None
        return Mark(self.start, self.start_index)

    def encode(self) -> str:
        """``<mark position>|<mark index>|<start index>|<latest index>[|<start position>]``."""
        text = f"{self.mark.encode_position()}|{self.mark.index}|{self.start_index}|{self.latest}"
        if self.start != "previous":
            text += "|" + (EARLIEST if self.start is None else str(self.start))
        return text

    @classmethod
    def decode(cls, text: str) -> PartitionOffset:
        parts = text.split("|")
        if len(parts) not in (4, 5):
            raise ValueError(f"{text!r} is not a partition offset")
        mark = Mark(_decode_position(parts[0]), int(parts[1]))
        start: Position | Literal["previous"] | None = "previous"
        if len(parts) == 5:
            start = _decode_position(parts[4])
        return cls(mark, int(parts[2]), int(parts[3]), start)


@dataclass(frozen=True)
class SourceOffset:
    """The whole offset of one source: every partition it has positioned, by topic."""

    partitions: Mapping[TopicPartition, PartitionOffset] = field(default_factory=dict)
    app: str = ""
    initial: bool = False
    """True only for the initial offset: partitions missing from it start at ``startingOffsets``
    (missing from any later offset, a partition is new and starts at the earliest message)."""

    def to_json(self) -> dict[str, Any]:
        topics: dict[str, dict[str, str]] = {}
        for tp in sorted(self.partitions):
            topics.setdefault(tp.topic, {})[str(tp.partition)] = self.partitions[tp].encode()
        out: dict[str, Any] = {"pulsar": FORMAT_VERSION, "app": self.app, "topics": topics}
        if self.initial:
            out["init"] = True
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | str) -> SourceOffset:
        """Parse a checkpointed offset; a bad one raises :class:`PulsarError` naming the entry."""
        if isinstance(data, str):
            text = data
            try:
                data = json.loads(text)
            except ValueError as exc:
                raise PulsarError(f"Pulsar source offset is not JSON: {text[:200]!r}") from exc
        if not isinstance(data, Mapping) or data.get("pulsar") != FORMAT_VERSION:
            raise PulsarError(
                f"not a Pulsar source offset (format {FORMAT_VERSION} expected): {str(data)[:200]}"
            )
        partitions: dict[TopicPartition, PartitionOffset] = {}
        topics = data.get("topics", {})
        if not isinstance(topics, Mapping):
            raise PulsarError(f"Pulsar source offset: 'topics' must be an object, got {topics!r}")
        for topic, entries in topics.items():
            if not isinstance(entries, Mapping):
                raise PulsarError(f"Pulsar source offset: topic {topic} must map partitions to entries")
            for partition, entry in entries.items():
                try:
                    partitions[TopicPartition(topic, int(partition))] = PartitionOffset.decode(entry)
                except (TypeError, ValueError) as exc:
                    raise PulsarError(
                        f"Pulsar source offset: bad entry for {topic} partition {partition}: {entry!r}"
                    ) from exc
        return cls(partitions, str(data.get("app", "")), bool(data.get("init", False)))

    def same_positions(self, other: SourceOffset) -> bool:
        """True when both offsets consumed exactly the same (nothing new to read)."""
        if self.initial != other.initial or self.partitions.keys() != other.partitions.keys():
            return False
        return all(self.partitions[tp].mark == other.partitions[tp].mark for tp in self.partitions)


@dataclass(frozen=True)
class TopicBatchMetrics:
    """Per-topic figures of one micro-batch, from its end offset."""

    topic: str
    partitions: int
    rows: int
    """Messages in the batch."""
    lag: int
    """Messages left in Pulsar after the batch end, as the broker reported when it was planned."""
    end_index: int
    """Sum over partitions of the broker index the batch ended at (monotonic; handy for checks)."""
    waiting: int = 0
    """Partitions with lag that this batch read nothing of (admission gave their turn to others)."""


def topic_metrics(offset: SourceOffset) -> list[TopicBatchMetrics]:
    """Rows and lag per topic of the batch that ended at ``offset``, sorted by topic."""
    acc: dict[str, list[int]] = {}
    for tp, entry in offset.partitions.items():
        row = acc.setdefault(tp.topic, [0, 0, 0, 0, 0])
        row[0] += 1
        row[1] += entry.rows
        row[2] += entry.lag
        row[3] += entry.mark.index
        row[4] += entry.lag > 0 and entry.rows == 0
    return [TopicBatchMetrics(t, *acc[t]) for t in sorted(acc)]


# -- user-facing offset specs: startingOffsets / endingOffsets -------------------------------------

_MESSAGE_ID_RE = re.compile(r"^-?\d+:-?\d+(:-?\d+:-?\d+)?$")


@dataclass(frozen=True)
class PositionSpec:
    """``earliest``, ``latest``, or ``at`` a message (given as ledger:entry[:partition:batch])."""

    kind: Literal["earliest", "latest", "at"]
    position: Position | None = None

    def __str__(self) -> str:
        return self.kind if self.position is None else f"at {self.position}"


@dataclass(frozen=True)
class OffsetSpec:
    """Per-topic (and per-partition) positions; ``default`` for everything not listed."""

    default: PositionSpec
    topics: Mapping[str, PositionSpec | Mapping[int, PositionSpec]] = field(default_factory=dict)

    def for_partition(self, tp: TopicPartition) -> PositionSpec:
        spec = self.topics.get(tp.topic)
        if spec is None:
            return self.default
        if isinstance(spec, PositionSpec):
            return spec
        return spec.get(tp.partition, self.default)


def format_message_id(ledger: int, entry: int, partition: int, batch: int) -> str:
    """The ``__messageId`` column: ``ledger:entry:partition:batch`` (batch -1 if not batched)."""
    return f"{ledger}:{entry}:{partition}:{batch}"


def parse_message_id(text: str) -> Position:
    """``L:E`` (a whole entry, its first message) or ``L:E:P:B`` as in ``__messageId``."""
    if not _MESSAGE_ID_RE.match(text.strip()):
        raise ValueError(f"{text!r} is not a message id (ledger:entry or ledger:entry:partition:batch)")
    parts = [int(p) for p in text.strip().split(":")]
    if len(parts) == 2:
        return Position(parts[0], parts[1])
    return Position(parts[0], parts[1], parts[3])


def parse_offset_spec(
    value: str,
    option: str,
    allowed: tuple[str, ...] = (EARLIEST, LATEST),
    default: str = EARLIEST,
) -> OffsetSpec:
    """Parse ``earliest`` / ``latest`` or a JSON object per topic (errors name ``option``).

    JSON: ``{"persistent://t/ns/a": "earliest", "persistent://t/ns/b": {"0": "12:5", "1":
    "latest"}, "persistent://t/ns/c": "7:3:-1:-1"}``; a message id is where to start (inclusive)
    for startingOffsets and where to stop (exclusive) for endingOffsets. Topics not listed use
    ``default``.
    """
    text = value.strip()
    if text in allowed:
        return OffsetSpec(PositionSpec(text))  # type: ignore[arg-type]
    if not text.startswith("{"):
        raise ConfigError(
            f"option {option}={value!r} is invalid: expected {' or '.join(allowed)} or a JSON object "
            "of topic -> position"
        )
    topics: dict[str, PositionSpec | Mapping[int, PositionSpec]] = {}
    for topic, name, spec in topic_entries(option, text, "topic -> position", f"{option}={value!r}"):
        if name.partition_index is not None:
            raise ConfigError(
                f"option {option}: use the partitioned topic {name.base} with a partition map, not {topic}"
            )
        if isinstance(spec, dict):
            parts: dict[int, PositionSpec] = {}
            for partition, item in spec.items():
                try:
                    index = int(partition)
                except ValueError as exc:
                    raise ConfigError(
                        f"option {option}: partition {partition!r} of {topic} is not a number"
                    ) from exc
                parts[index] = _position_spec(item, option, f"{topic} partition {partition}", allowed)
            topics[topic] = parts
        else:
            topics[topic] = _position_spec(spec, option, topic, allowed)
    return OffsetSpec(PositionSpec(default), topics)  # type: ignore[arg-type]


def _position_spec(value: Any, option: str, where: str, allowed: tuple[str, ...]) -> PositionSpec:
    if isinstance(value, str) and value in allowed:
        return PositionSpec(value)  # type: ignore[arg-type]
    if isinstance(value, str):
        try:
            return PositionSpec("at", parse_message_id(value))
        except ValueError as exc:
            raise ConfigError(f"option {option}: {where}: {exc} (or one of {', '.join(allowed)})") from exc
    raise ConfigError(f"option {option}: {where}: expected a string, got {value!r}")

"""Topic handover: a topic moved to another slot group continues where its old group stopped.

**The rule.** When a streaming query first sees a partition (it is not in the query's checkpoint),
it starts right after the newest position any *other* group of the same app committed for that
partition, if one did; a partition no group ever committed starts as before (``startingOffsets``
in the first batch, the earliest message after). "Newest" is the highest broker index, so a topic
moved twice (A -> C -> B) continues from C. Nothing is re-read (the old group's sinks hold
everything up to its committed mark) and nothing is skipped (the mark is exact, down to the message
inside a batch entry).

**Where the committed position comes from.** The old group's checkpoint, not its Pulsar
subscription: a subscription cursor lags the truth (Spark never commits the last batch of a stopped
query to the source, a cursor cannot stop inside a batch entry, grouped acks die with a killed
process) and ``widehouse pulsar cleanup`` deletes it a day after the group stopped. The offset log
entry of the group's last *committed* batch (``<root>/<app>/<group>/offsets/<n>`` with
``commits/<n>``) is exact and durable. The stream job reads the app's other checkpoints when it
starts a group (:mod:`widehouse.stream.spark.handover`) and hands the marks to the source as the
``startAfter`` option; the controller applies them to partitions new to the query
(:meth:`~widehouse.source.controller.StreamController._starts`).

**The race, and how it is closed.** The old group must have stopped at a batch boundary before the
new group starts; the supervisor applies a plan that way (stop the affected groups, then start
them with their new topics). A group that was killed inside a batch has a planned but uncommitted
batch in its offset log, which it would replay on its next start, moved topics included; if that
batch read a topic being handed over, :func:`handover_marks` refuses with a message naming the
group, the batch and the topic (restart the old group once to finish it, then start the new one).
A still-running old group is not detected here: that is the supervisor's contract.

**Checks at first sight** (:func:`resolve_handover`): a partition now empty is not started yet;
one whose broker index is below the mark was deleted and recreated (start at its earliest);
messages after the mark trimmed by retention are data loss (``failOnDataLoss``).

Pure: no client, no Spark.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from widehouse.errors import ConfigError, PulsarError
from widehouse.pulsar.positions import EARLIEST, EntryInfo, Mark, Position, TopicPartition
from widehouse.source.offsets import SourceOffset
from widehouse.source.option_text import topic_entries


class HandoverError(PulsarError):
    """A topic cannot be handed over safely (its old group has an unfinished batch that read it)."""


@dataclass(frozen=True)
class GroupCheckpoint:
    """What one slot group's checkpoint says about its positions."""

    group: str
    committed: SourceOffset | None
    """End offset of the group's last committed batch (None: it never committed one)."""
    committed_batch: int | None = None
    pending: SourceOffset | None = None
    """End offset of a batch planned after the last committed one (Spark replays it on restart)."""
    pending_batch: int | None = None


def _wanted(topics: Iterable[str]) -> list[TopicPartition]:
    return [TopicPartition.of(t) for t in topics]


def _selected(tp: TopicPartition, wanted: list[TopicPartition]) -> bool:
    return any(tp.topic == w.topic and (w.partition < 0 or tp.partition == w.partition) for w in wanted)


def handover_marks(
    group: str, topics: Iterable[str], checkpoints: Iterable[GroupCheckpoint]
) -> dict[TopicPartition, Mark]:
    """The newest mark other groups committed for each partition of ``topics`` (see module doc).

    Raises :class:`HandoverError` when another group has an unfinished batch that read one of them.
    """
    wanted = _wanted(topics)
    best: dict[TopicPartition, Mark] = {}
    for cp in checkpoints:
        if cp.group == group:
            continue
        if cp.pending is not None:
            for tp, entry in sorted(cp.pending.partitions.items()):
                if entry.rows > 0 and _selected(tp, wanted):
                    raise HandoverError(
                        f"slot group {cp.group} has an unfinished batch {cp.pending_batch} that read "
                        f"{entry.rows} message(s) of {tp}, which group {group} is to continue: restart "
                        f"group {cp.group} once so it finishes that batch, then start group {group}"
                    )
        if cp.committed is None:
            continue
        for tp, entry in cp.committed.partitions.items():
            if _selected(tp, wanted) and (tp not in best or entry.mark.index > best[tp].index):
                best[tp] = entry.mark
    return best


@dataclass(frozen=True)
class HandoverStart:
    """Where a handed-over partition starts now."""

    start: Mark | None
    """The start mark; None: the partition is empty, decide again when it has messages."""
    problem: str | None = None
    """Why the mark could not be used as is (then ``start`` is the partition's earliest)."""
    data_loss: bool = False
    """True when messages after the mark are gone (``failOnDataLoss`` decides)."""


def resolve_handover(
    tp: TopicPartition, mark: Mark, first: EntryInfo | None, end: EntryInfo | None
) -> HandoverStart:
    """Check a handed-over ``mark`` against the partition's first and last entries now."""
    if end is None:
        return HandoverStart(None)
    earliest = Mark(None, -1 if first is None else first.first_index - 1)
    if end.index < mark.index:
        return HandoverStart(
            earliest,
            f"{tp} was recreated since its old group committed index {mark.index} (it ends at "
            f"{end.index} now): reading it from its earliest message",
        )
    if earliest.index > mark.index:
        lost = earliest.index - mark.index
        return HandoverStart(
            earliest,
            f"{lost} message(s) of {tp} after the handed-over index {mark.index} were deleted "
            "before any group read them",
            data_loss=True,
        )
    if earliest.index == mark.index:
        return HandoverStart(earliest)  # same place; the mark's own entry may be trimmed already
    return HandoverStart(mark)


# -- the startAfter option: {"<topic>": {"<partition>": "<position>|<index>"}} ---------------------


def encode_marks(marks: Mapping[TopicPartition, Mark]) -> str:
    """The ``startAfter`` option's JSON for ``marks``."""
    topics: dict[str, dict[str, str]] = {}
    for tp in sorted(marks):
        mark = marks[tp]
        topics.setdefault(tp.topic, {})[str(tp.partition)] = f"{mark.encode_position()}|{mark.index}"
    return json.dumps(topics, separators=(",", ":"))


def parse_marks(text: str, option: str = "startAfter") -> dict[TopicPartition, Mark]:
    """Parse the ``startAfter`` option (errors name the option and the bad entry)."""
    marks: dict[TopicPartition, Mark] = {}
    for topic, name, parts in topic_entries(option, text, "topic -> partition -> mark"):
        if not isinstance(parts, dict):
            raise ConfigError(f"option {option}: {topic} must map partitions to marks, got {parts!r}")
        for partition, value in parts.items():
            try:
                position, index = str(value).split("|")
                mark = Mark(None if position == EARLIEST else Position.parse(position), int(index))
                marks[TopicPartition(str(name.base), int(partition))] = mark
            except ValueError as exc:
                raise ConfigError(
                    f"option {option}: {topic} partition {partition!r}: {value!r} is not "
                    "<ledger:entry[:batch]|earliest>|<index>"
                ) from exc
    return marks

"""Best-fit bin packing of light topics into slot groups, with the moves a replan allows.

A :class:`Packer` holds the packed groups ("bins") of a plan in the making. Bins are filled to a
*target* load (``target_fill * slot_capacity``) and hold at most ``max_group_topics`` topics.
Placing is best-fit decreasing: topics heaviest first (ties by name), each into the bin with the
least room that still fits it, a new bin only when none does; bins with room sit in a list sorted
by room, so a placement is a binary search (10,000 topics plan in milliseconds).

Replans start from the previous groups and only move what they must:

- :meth:`Packer.shed` takes topics out of a bin that passed the *hot* load (or holds too many
  topics) until it is back at the target, moving as few topics as it can: the lightest single
  topic that removes the whole excess, else the heaviest and repeat;
- :meth:`Packer.consolidate` dissolves the bins with the fewest topics into the others while the
  plan has clearly more bins than it needs, and only when their topics fit without a new bin.

Everything is deterministic: iteration orders are sorted, ties broken by name.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Iterable

Item = tuple[float, str]
"""(load, topic)."""


def heaviest_first(items: Iterable[Item]) -> list[Item]:
    return sorted(items, key=lambda item: (-item[0], item[1]))


class Bin:
    """A packed group being built: its topics with their loads."""

    __slots__ = ("load", "members", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self.members: dict[str, float] = {}
        self.load = 0.0

    def add(self, topic: str, load: float) -> None:
        self.members[topic] = load
        self.load += load

    def remove(self, topic: str) -> float:
        load = self.members.pop(topic)
        self.load = sum(self.members.values()) if self.members else 0.0
        return load

    def __len__(self) -> int:
        return len(self.members)


class Packer:
    """Packed groups of one plan in the making; see the module docstring."""

    def __init__(self, target: float, max_topics: int, new_name: Callable[[], str]) -> None:
        self.target = target
        self.max_topics = max_topics
        self._new_name = new_name
        self.bins: dict[str, Bin] = {}
        self._room: list[tuple[float, str]] = []  # (room left, name) of bins that can take a topic

    # -- building ------------------------------------------------------------------------------
    def keep(self, name: str, items: Iterable[Item]) -> None:
        """Start from a previous group with the topics it keeps."""
        group = Bin(name)
        for load, topic in sorted(items, key=lambda item: item[1]):
            group.add(topic, load)
        if len(group):
            self.bins[name] = group

    def _index(self) -> None:
        self._room = sorted(
            (self.target - b.load, b.name) for b in self.bins.values() if len(b) < self.max_topics
        )

    def place(self, items: Iterable[Item]) -> None:
        """Best-fit decreasing: every topic into the fullest bin it fits, new bins as needed."""
        self._index()
        for load, topic in heaviest_first(items):
            index = bisect_left(self._room, (load, ""))
            if index < len(self._room):
                _, name = self._room.pop(index)
                group = self.bins[name]
            else:
                group = Bin(self._new_name())
                self.bins[group.name] = group
            group.add(topic, load)
            if len(group) < self.max_topics:
                insort(self._room, (self.target - group.load, group.name))

    # -- replan moves ----------------------------------------------------------------------------
    def shed(self, hot: float) -> list[Item]:
        """Take topics out of bins above ``hot`` load or over the topic limit; returns them."""
        evicted: list[Item] = []
        for name in sorted(self.bins):
            group = self.bins[name]
            if len(group) > self.max_topics:
                lightest = sorted(group.members.items(), key=lambda kv: (kv[1], kv[0]))
                for topic, _ in lightest[: len(group) - self.max_topics]:
                    evicted.append((group.remove(topic), topic))
            if group.load > hot:
                evicted.extend(self._shed_load(group))
            if not len(group):
                del self.bins[name]
        return evicted

    def _shed_load(self, group: Bin) -> list[Item]:
        ordered = sorted((load, topic) for topic, load in group.members.items())
        evicted: list[Item] = []
        excess = group.load - self.target
        while excess > 0 and ordered:
            index = bisect_left(ordered, (excess, ""))
            load, topic = ordered.pop(index if index < len(ordered) else -1)
            group.remove(topic)
            evicted.append((load, topic))
            excess = group.load - self.target
        return evicted

    def consolidate(self, allowed: int, tries: int = 8) -> None:
        """Dissolve bins with the fewest topics while there are more than ``allowed``."""
        while len(self.bins) > allowed:
            candidates = sorted(self.bins.values(), key=lambda b: (len(b), b.load, b.name))
            for group in candidates[:tries]:
                placed = self._fit_elsewhere(group)
                if placed is not None:
                    del self.bins[group.name]
                    for name, items in placed.items():
                        for load, topic in items:
                            self.bins[name].add(topic, load)
                    break
            else:
                return

    def _fit_elsewhere(self, group: Bin) -> dict[str, list[Item]] | None:
        room = sorted(
            (self.target - b.load, b.name)
            for b in self.bins.values()
            if b.name != group.name and len(b) < self.max_topics
        )
        added: dict[str, list[Item]] = {}
        for load, topic in heaviest_first((load, topic) for topic, load in group.members.items()):
            index = bisect_left(room, (load, ""))
            if index == len(room):
                return None
            left, name = room.pop(index)
            added.setdefault(name, []).append((load, topic))
            if len(self.bins[name]) + len(added[name]) < self.max_topics:
                insort(room, (left - load, name))
        return added

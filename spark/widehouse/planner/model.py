"""The planner's data: per-topic traffic in, a plan of slot groups out.

A topic's **load** is ``byte_rate + msg_rate * message_cost`` (bytes/s equivalents), measured
against :attr:`PlannerSettings.slot_capacity`, the load one core carries. A :class:`Plan` holds
groups (name, topics, load, cores, isolated) and the planned partition count of every topic.

Group names are stable identifiers the streaming job keys its checkpoint and idempotency on:

- packed groups are ``g001``, ``g002``, ... in order of creation; a replan keeps the name of every
  group that persists and never reuses a number (the plan carries ``next_group``);
- an isolated topic's group is ``iso-<slug>-<hash>``: the slug of the topic's local name (lower
  case, runs of other characters turned into ``-``, at most 40 characters) and the first 8 hex
  digits of the SHA-1 of the full topic name, so the name depends on the topic alone.

Every group name matches :data:`GROUP_NAME_RE` (lower-case letters, digits, ``-`` and ``_``; at
most 64 characters), safe in paths, application names and deduplication tokens.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from widehouse.errors import PlanError
from widehouse.settings import PlannerSettings

# names are checked with fullmatch (with match, `$` lets "name\n" pass)
GROUP_NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
PACKED_NAME_RE = re.compile(r"g([0-9]{3,})")
ISOLATED_PREFIX = "iso-"
_TOPIC_RE = re.compile(
    r"(persistent|non-persistent)://[A-Za-z0-9_][A-Za-z0-9_.\-=:]*/[A-Za-z0-9_][A-Za-z0-9_.\-=:]*/"
    r"[A-Za-z0-9_][A-Za-z0-9_.\-=:]*"
)
_PARTITION_RE = re.compile(r".+-partition-[0-9]+")
_SLUG_RE = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True)
class TopicTraffic:
    """Measured traffic of one topic (all partitions together)."""

    topic: str
    msg_rate: float
    """Messages per second."""
    byte_rate: float
    """Bytes per second."""
    partitions: int = 0
    """Partitions the topic has now, when the source knows (0: unknown or not partitioned)."""

    def load(self, settings: PlannerSettings) -> float:
        """Bytes/s equivalent: the bytes plus ``message_cost`` per message."""
        return self.byte_rate + self.msg_rate * settings.message_cost


def check_topic(topic: str, where: str = "") -> str:
    """Return ``topic`` if it is a full, non-partition Pulsar topic name, else raise PlanError."""
    prefix = f"{where}: " if where else ""
    if not isinstance(topic, str) or not _TOPIC_RE.fullmatch(topic):
        raise PlanError(
            f"{prefix}topic {topic!r} is not a full Pulsar topic name (persistent://tenant/namespace/topic)"
        )
    if _PARTITION_RE.fullmatch(topic):
        raise PlanError(f"{prefix}topic {topic!r} is a partition; plan the partitioned topic once")
    return topic


def check_traffic(record: TopicTraffic, where: str = "") -> TopicTraffic:
    """Validate one traffic record (full topic name, finite non-negative rates)."""
    check_topic(record.topic, where)
    prefix = f"{where}: " if where else ""
    for name in ("msg_rate", "byte_rate"):
        value = getattr(record, name)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise PlanError(f"{prefix}{name} of {record.topic} must be a finite number, got {value!r}")
        if value < 0:
            raise PlanError(f"{prefix}{name} of {record.topic} must be >= 0, got {value!r}")
    if isinstance(record.partitions, bool) or not isinstance(record.partitions, int) or record.partitions < 0:
        raise PlanError(f"{prefix}partitions of {record.topic} must be an integer >= 0")
    return record


def isolated_group_name(topic: str) -> str:
    """The stable name of the group that holds ``topic`` alone."""
    local = topic.rsplit("/", 1)[-1].lower()
    slug = _SLUG_RE.sub("-", local).strip("-")[:40].strip("-") or "topic"
    digest = hashlib.sha1(topic.encode(), usedforsecurity=False).hexdigest()[:8]
    return f"{ISOLATED_PREFIX}{slug}-{digest}"


def packed_group_name(number: int) -> str:
    return f"g{number:03d}"


@dataclass(frozen=True)
class Group:
    """A slot group: topics one streaming application reads together."""

    name: str
    topics: tuple[str, ...]
    load: float
    """Planned load of the group, bytes/s equivalent."""
    cores: int
    isolated: bool = False

    def fill(self, settings: PlannerSettings) -> float:
        """Load over the capacity of the group's cores."""
        return self.load / (self.cores * settings.slot_capacity)


@dataclass(frozen=True)
class Plan:
    """Slot groups and partition counts. Build with :func:`widehouse.planner.plan` or load from JSON."""

    groups: tuple[Group, ...]
    partitions: Mapping[str, int]
    loads: Mapping[str, float] = field(default_factory=dict)
    """Load per topic the plan was made from (may be empty for a hand-written plan)."""
    settings: PlannerSettings | None = None
    next_group: int = 1
    """Number of the next packed group a replan creates (numbers are never reused)."""
    source: str | None = field(default=None, compare=False)
    """The file the plan was loaded from, for error messages."""
    _by_topic: Mapping[str, str] = field(init=False, repr=False, compare=False)
    _by_name: Mapping[str, Group] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_topic: dict[str, str] = {}
        by_name: dict[str, Group] = {}
        for group in self.groups:
            by_name[group.name] = group
            for topic in group.topics:
                by_topic[topic] = group.name
        object.__setattr__(self, "partitions", MappingProxyType(dict(self.partitions)))
        object.__setattr__(self, "loads", MappingProxyType(dict(self.loads)))
        object.__setattr__(self, "_by_topic", MappingProxyType(by_topic))
        object.__setattr__(self, "_by_name", MappingProxyType(by_name))

    def group(self, name: str) -> Group:
        """The group called ``name``; PlanError naming the plan and the known groups otherwise."""
        try:
            return self._by_name[name]
        except KeyError:
            known = ", ".join(g.name for g in self.groups[:20]) or "none"
            more = f" and {len(self.groups) - 20} more" if len(self.groups) > 20 else ""
            where = f"plan {self.source}" if self.source else "plan"
            raise PlanError(f"{where} has no group {name!r} (groups: {known}{more})") from None

    def group_of(self, topic: str) -> Group:
        """The group that reads ``topic``."""
        name = self._by_topic.get(topic)
        if name is None:
            where = f"plan {self.source}" if self.source else "plan"
            raise PlanError(f"{where} has no topic {topic!r}")
        return self._by_name[name]

    @property
    def assignment(self) -> Mapping[str, str]:
        """Topic -> group name."""
        return self._by_topic

    @property
    def topics(self) -> tuple[str, ...]:
        return tuple(sorted(self._by_topic))

    @property
    def isolated_topics(self) -> tuple[str, ...]:
        return tuple(sorted(t for g in self.groups if g.isolated for t in g.topics))

    @property
    def cores(self) -> int:
        return sum(g.cores for g in self.groups)

    def __iter__(self) -> Iterator[Group]:
        return iter(self.groups)

    def __len__(self) -> int:
        return len(self.groups)

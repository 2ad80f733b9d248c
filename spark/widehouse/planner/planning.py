"""``plan(traffic, settings, previous=None) -> Plan``: the slot planner.

Model (``C`` = slot capacity, ``f`` = target fill, ``load`` = bytes/s + msg/s x message cost):

1. **Isolation.** A topic with ``load > isolation x C`` gets a group of its own with
   ``ceil(load / (f x C))`` cores (the same headroom packed groups get). A topic isolated by the
   previous plan stays isolated until its load falls below ``0.8 x isolation x C``, so a topic near
   the threshold does not flap. An isolated group keeps its previous core count while that is
   neither overloaded (``load > cores x hot``) nor clearly too many (``load <= (cores - 1) x f x C x
   (1 - imbalance)``).
2. **Packing.** The other topics are packed best-fit decreasing into groups of 1 core, each filled
   to at most ``f x C`` and ``max_group_topics`` topics, so the number of groups is close to the
   lower bound ``ceil(packed load / (f x C))``.
3. **Stability.** With a previous plan, every topic stays in its group unless that group is *hot*
   (load above ``min(C, f x C x (1 + imbalance))``, or over the topic limit): then the fewest
   topics leave it to bring it back to ``f x C``. New topics, and topics that left a hot group or
   changed isolation, are placed best-fit into the existing groups (new groups only when nothing
   fits). Vanished topics are dropped; a group left empty disappears and its name is never reused.
   Whenever the plan has more packed groups than ``lower bound + max(1, ceil(lower bound x
   imbalance))`` (traffic fell, or packing was unlucky), the groups with the fewest topics are
   dissolved into the others, as long as their topics fit without a new group. Replanning the
   same traffic therefore moves nothing.
4. **Partitions.** ``ceil(load / partition_capacity)`` between 1 and ``max_partitions``, at least
   the cores of an isolated topic's group, and never fewer than the previous plan or the topic
   already has (Pulsar cannot shrink a partitioned topic).

The same traffic, settings and previous plan always give the same plan.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from widehouse.errors import PlanError
from widehouse.planner.model import (
    PACKED_NAME_RE,
    Group,
    Plan,
    TopicTraffic,
    check_traffic,
    isolated_group_name,
    packed_group_name,
)
from widehouse.planner.packing import Item, Packer
from widehouse.settings import PlannerSettings

RELEASE = 0.8
"""An isolated topic returns to packing when its load falls below RELEASE x the isolation threshold."""
CONSOLIDATE_TRIES = 8


def plan(
    traffic: Iterable[TopicTraffic] | Mapping[str, TopicTraffic],
    settings: PlannerSettings | None = None,
    previous: Plan | None = None,
) -> Plan:
    """Plan slot groups and partitions for ``traffic`` (see the module docstring for the model)."""
    s = settings or PlannerSettings()
    records = _index(traffic)
    loads = {topic: record.load(s) for topic, record in records.items()}
    capacity = s.slot_capacity
    target = s.target_fill * capacity
    hot = min(capacity, target * (1 + s.imbalance))
    threshold = s.isolation * capacity

    prev_assignment: Mapping[str, str] = previous.assignment if previous else {}
    prev_groups = {g.name: g for g in previous.groups} if previous else {}
    prev_isolated = set(previous.isolated_topics) if previous else set()

    isolated: list[Group] = []
    packed: dict[str, float] = {}
    for topic in sorted(loads):
        load = loads[topic]
        was_isolated = topic in prev_isolated
        if load > threshold or (was_isolated and load >= threshold * RELEASE):
            name = isolated_group_name(topic)
            before = prev_groups.get(prev_assignment.get(topic, ""))
            cores = _isolated_cores(load, s, hot, before.cores if before and was_isolated else None)
            isolated.append(Group(name, (topic,), load, cores, isolated=True))
        else:
            packed[topic] = load

    next_number = _next_number(previous)

    def new_name() -> str:
        nonlocal next_number
        name = packed_group_name(next_number)
        next_number += 1
        return name

    packer = Packer(target, s.max_group_topics, new_name)
    kept: set[str] = set()
    if previous:
        for group in previous.groups:
            if group.isolated:
                continue
            items: list[Item] = [(packed[t], t) for t in group.topics if t in packed]
            packer.keep(group.name, items)
            kept.update(t for _, t in items)
    pending: list[Item] = [(load, topic) for topic, load in packed.items() if topic not in kept]
    pending.extend(packer.shed(hot))
    packer.place(pending)
    packer.consolidate(_allowed_groups(packed, s), CONSOLIDATE_TRIES)

    groups = [
        Group(b.name, tuple(sorted(b.members)), b.load, 1, isolated=False) for b in packer.bins.values()
    ]
    groups.extend(isolated)
    groups.sort(key=lambda g: g.name)
    prev_partitions: Mapping[str, int] = previous.partitions if previous else {}
    partitions = {
        topic: _partitions(loads[topic], s, records[topic].partitions, prev_partitions.get(topic, 0))
        for topic in sorted(loads)
    }
    for group in isolated:
        topic = group.topics[0]
        partitions[topic] = max(partitions[topic], min(group.cores, s.max_partitions))
    return Plan(
        groups=tuple(groups),
        partitions=partitions,
        loads={topic: loads[topic] for topic in sorted(loads)},
        settings=s,
        next_group=next_number,
    )


def lower_bound_groups(total_load: float, topics: int, settings: PlannerSettings) -> int:
    """Fewest packed groups for ``topics`` topics of ``total_load``: by load at the target fill and
    by topic count (no packing does better)."""
    if topics <= 0:
        return 0
    by_load = math.ceil(total_load / (settings.target_fill * settings.slot_capacity) - 1e-9)
    by_count = math.ceil(topics / settings.max_group_topics)
    return max(1, by_load, by_count)


def _allowed_groups(packed: Mapping[str, float], s: PlannerSettings) -> int:
    bound = lower_bound_groups(sum(packed.values()), len(packed), s)
    return bound + max(1, math.ceil(bound * s.imbalance))


def _isolated_cores(load: float, s: PlannerSettings, hot: float, before: int | None) -> int:
    ideal = max(1, math.ceil(load / (s.target_fill * s.slot_capacity) - 1e-9))
    if before is None:
        return ideal
    overloaded = load > before * hot
    too_many = load <= (before - 1) * s.target_fill * s.slot_capacity * (1 - s.imbalance)
    return ideal if overloaded or too_many else before


def _partitions(load: float, s: PlannerSettings, current: int, before: int) -> int:
    wanted = min(max(1, math.ceil(load / s.partition_capacity - 1e-9)), s.max_partitions)
    return max(wanted, current, before)


def _next_number(previous: Plan | None) -> int:
    if previous is None:
        return 1
    used = [int(m.group(1)) for g in previous.groups if (m := PACKED_NAME_RE.fullmatch(g.name))]
    return max([previous.next_group, *(n + 1 for n in used)])


def _index(traffic: Iterable[TopicTraffic] | Mapping[str, TopicTraffic]) -> dict[str, TopicTraffic]:
    records: dict[str, TopicTraffic] = {}
    items: Iterable[tuple[str | None, TopicTraffic]] = (
        traffic.items() if isinstance(traffic, Mapping) else ((None, record) for record in traffic)
    )
    for key, record in items:
        if not isinstance(record, TopicTraffic):
            raise PlanError(f"traffic entries must be TopicTraffic, got {type(record).__name__}")
        check_traffic(record)
        if key is not None and key != record.topic:
            raise PlanError(f"traffic key {key!r} does not match its record's topic {record.topic!r}")
        if record.topic in records:
            raise PlanError(f"topic {record.topic} appears twice in the traffic")
        records[record.topic] = record
    return records

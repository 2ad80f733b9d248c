"""Admission control: how many messages each topic and partition may take in one trigger.

Pure functions over counts (the source knows exact backlogs from the broker index):

1. every topic's backlog is first clipped to its cap (``maxMessagesPerTopic``);
2. if everything left fits in the budget (``maxMessagesPerTrigger``), everything is taken;
3. otherwise each topic with a backlog first gets a floor (``minMessagesPerTopic``, shrunk to
   ``budget // topics`` when the budget cannot cover it), so a small topic is never starved by a
   big one; the rest of the budget is split in proportion to each topic's remaining backlog
   (water-filling: a topic that reaches its cap is settled and the excess goes to the others),
   with largest-remainder rounding so the total is exactly the budget;
4. a topic's share is split over its partitions the same way (floor 1), so no partition starves.

When even one message per topic does not fit, ``rotation`` picks which topics go first, so over
successive triggers every topic gets its turn.

5. a partition whose take stops inside its backlog is a *cut*, and each cut costs the driver a
   lookup on the broker (where that message is). When more than ``maxCutPartitions`` partitions
   would be cut (a budget spread thin over thousands of partitions), :func:`fewer_cuts` gives
   those partitions' messages to whole partitions instead, in turn: over successive triggers every
   partition is read, each trigger cuts at most that many, and the total stays what step 3 granted.
6. where a cut lands is the broker's to find (:meth:`~widehouse.source.broker.BrokerView.locate_all`):
   with ``cutSlack`` a cut may end up to that share of its take short, at the end of an entry a
   probe of the search found, so a trigger takes between ``1 - cutSlack`` of its grant and all of it.
   A drain (``Trigger.AvailableNow``) uses only the slack that costs it no batch
   (:func:`drain_slack`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import TypeVar

K = TypeVar("K", bound=Hashable)


def allocate(
    demand: Mapping[K, int],
    budget: int | None,
    floor: int = 0,
    caps: Mapping[K, int] | None = None,
    rotation: int = 0,
) -> dict[K, int]:
    """Messages granted per key; never more than its demand (or cap), summing to at most ``budget``.

    ``budget`` None means unlimited (caps still apply). Keys must sort (they are topic names or
    partition numbers) so the result is deterministic.
    """
    caps = caps or {}
    need: dict[K, int] = {}
    for key, wanted in demand.items():
        if wanted < 0:
            raise ValueError(f"negative demand {wanted} for {key!r}")
        cap = caps.get(key)
        need[key] = min(wanted, cap) if cap is not None else wanted
    grant: dict[K, int] = dict.fromkeys(demand, 0)
    total = sum(need.values())
    if budget is None or total <= budget:
        grant.update(need)
        return grant
    if budget <= 0:
        return grant
    active = sorted((k for k, n in need.items() if n > 0), key=_sort_key)
    if floor > 0 and budget < len(active):
        # not even one message each: take turns
        start = rotation % len(active)
        for key in (active[start:] + active[:start])[:budget]:
            grant[key] = 1
        return grant
    per_key_floor = min(floor, budget // len(active)) if floor > 0 else 0
    for key in active:
        grant[key] = min(need[key], per_key_floor)
    _fill(grant, demand, need, budget - sum(grant.values()))
    return grant


def _fill(grant: dict[K, int], demand: Mapping[K, int], bound: Mapping[K, int], remaining: int) -> None:
    """Water-filling: share ``remaining`` in proportion to each key's unserved backlog; a key that
    reaches its bound (cap or backlog) is settled and its excess goes to the others."""
    open_keys = sorted((k for k in grant if bound[k] > grant[k]), key=_sort_key)
    while remaining > 0 and open_keys:
        weight = {k: demand[k] - grant[k] for k in open_keys}
        total = sum(weight.values())
        settled = [k for k in open_keys if grant[k] + remaining * weight[k] / total >= bound[k]]
        if settled:
            for key in settled:
                remaining -= bound[key] - grant[key]
                grant[key] = bound[key]
            open_keys = [k for k in open_keys if k not in settled]
            continue
        shares = {k: remaining * weight[k] // total for k in open_keys}
        leftover = remaining - sum(shares.values())
        by_remainder = sorted(open_keys, key=lambda k: (-((remaining * weight[k]) % total), _sort_key(k)))
        for key in by_remainder[:leftover]:
            shares[key] += 1
        for key, amount in shares.items():
            grant[key] += amount
        return


def _sort_key(key: object) -> tuple[str, str]:
    return (type(key).__name__, str(key) if not isinstance(key, int) else f"{key:020d}")


@dataclass(frozen=True)
class Limits:
    """The admission settings of one source (from its options)."""

    max_per_trigger: int | None = None
    min_per_topic: int = 1000
    max_per_topic: Mapping[str, int] | None = None
    default_max_per_topic: int | None = None
    min_per_trigger: int | None = None
    max_trigger_delay_ms: int = 0
    max_cuts: int = 64
    cut_slack: float = 0.0
    """Share of a cut partition's take it may fall short by, to end at the end of an entry a probe
    of the search finds (``cutSlack``; 0: the exact take)."""

    def cap(self, topic: str) -> int | None:
        if self.max_per_topic and topic in self.max_per_topic:
            return self.max_per_topic[topic]
        return self.default_max_per_topic

    @property
    def limited(self) -> bool:
        return (
            self.max_per_trigger is not None
            or self.default_max_per_topic is not None
            or bool(self.max_per_topic)
        )


def plan_takes(
    backlog: Mapping[tuple[str, int], int],
    limits: Limits,
    budget: int | None,
    rotation: int = 0,
) -> dict[tuple[str, int], int]:
    """Messages to take per (topic, partition) this trigger.

    ``budget`` is what Spark allows (None: all available, e.g. ``Trigger.Once``, where caps are
    ignored too, as the ReadLimit contract requires); ``limits`` supply the floor and caps.
    """
    if budget is None:
        return dict(backlog)
    per_topic: dict[str, dict[int, int]] = {}
    for (topic, partition), count in backlog.items():
        per_topic.setdefault(topic, {})[partition] = count
    topic_demand = {t: sum(p.values()) for t, p in per_topic.items()}
    caps = {t: c for t in per_topic if (c := limits.cap(t)) is not None}
    topic_grant = allocate(topic_demand, budget, limits.min_per_topic, caps, rotation)
    takes: dict[tuple[str, int], int] = {}
    for topic, parts in per_topic.items():
        granted = allocate(parts, topic_grant[topic], floor=1, rotation=rotation)
        for partition, count in granted.items():
            takes[(topic, partition)] = count
    return takes


def fewer_cuts(
    takes: Mapping[K, int],
    available: Mapping[K, int],
    max_cuts: int,
    after: K | None = None,
    keep: Callable[[K], bool] = lambda _key: False,
) -> tuple[dict[K, int], K | None]:
    """At most ``max_cuts`` partitions taken partly; returns the takes and the turn's last key.

    A partition is cut when ``0 < take < available``. If more are, the messages granted to all of
    them are pooled and handed out again in key order starting after ``after`` (the last key of
    the previous turn, so every partition gets its turn): whole partitions while the pool covers
    them, then one cut with what is left. ``keep(key)``: a cut that must stay as it is (a
    topic with a cap, which a whole partition could exceed); kept cuts do not count.
    """
    partial = sorted((k for k, n in takes.items() if 0 < n < available[k] and not keep(k)), key=_sort_key)
    if len(partial) <= max_cuts:
        return dict(takes), after
    out = dict(takes)
    pool = 0
    for key in partial:
        pool += out[key]
        out[key] = 0
    start = 0
    if after is not None:
        later = [i for i, k in enumerate(partial) if _sort_key(k) > _sort_key(after)]
        start = later[0] if later else 0
    last = after
    for key in partial[start:] + partial[:start]:
        if pool <= 0:
            break
        out[key] = min(available[key], pool)
        pool -= out[key]
        last = key
    return out, last


def drain_slack(slack: float, remaining: int, budget: int, cut: int) -> float:
    """The share of their take a drain's cuts may fall short by without the drain taking a batch more.

    A drain of ``remaining`` messages takes ``ceil(remaining / budget)`` batches when each is full;
    the last one has ``spare`` room. A batch may fall short by that much in all and the drain still
    ends in as many batches, so its cuts (``cut`` messages granted to them) get at most
    ``spare / cut`` of slack. Without this bound, a 100,000-message drain in budgets of 33,334 fell
    one message short in its second batch and took a fourth batch for that message (~0.5 s); the
    probes the slack saves are worth ~20 ms a batch.
    """
    if slack <= 0 or cut <= 0 or budget <= 0 or remaining <= budget:
        return slack
    spare = -(-remaining // budget) * budget - remaining
    return min(slack, spare / cut)


def should_wait(available: int, limits: Limits, waited_ms: float, draining: bool) -> bool:
    """Hold the trigger back until ``minMessagesPerTrigger`` arrived or ``maxTriggerDelay`` passed.

    Never waits when draining (Trigger.AvailableNow must finish) or when nothing is configured.
    """
    if draining or limits.min_per_trigger is None or available == 0:
        return False
    return available < limits.min_per_trigger and waited_ms < limits.max_trigger_delay_ms

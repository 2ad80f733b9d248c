"""Live traffic from the Pulsar admin REST API, smoothed over observations in the state dir.

Topics: the persistent topics of the selected namespaces (given, or every namespace of the given
tenants, or of every tenant but ``pulsar``), without Pulsar's system namespaces
(``public/functions``) and system topics (local names starting with ``__``), optionally filtered
by a regular expression that must match the whole topic name. A partitioned topic counts once.

Rates: ``msgRateIn`` and ``msgThroughputIn`` from the topic stats, summed over the partitions of a
partitioned topic (``partitioned-stats?perPartition=true``). Brokers recompute these rates every
stats interval (5 s on the local standalone), so samples taken closer together repeat themselves.
Stats are fetched in parallel (one admin client per worker thread); a topic deleted between the
listing and its stats is left out. Each sample is recorded in the
:class:`~widehouse.planner.observations.ObservationStore`, and the traffic returned is the smoothed
(median) rate of every topic sampled.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from widehouse.errors import ConfigError, PlanError
from widehouse.planner.model import TopicTraffic, check_topic
from widehouse.planner.observations import ObservationStore
from widehouse.pulsar.admin import PulsarAdmin, map_with_admins
from widehouse.settings import PulsarSettings, mask_url

_log = logging.getLogger("widehouse.planner.live")

SYSTEM_TENANTS = frozenset({"pulsar"})
SYSTEM_NAMESPACES = frozenset({"public/functions"})
_NAMESPACE_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-=:]*/[A-Za-z0-9_][A-Za-z0-9_.\-=:]*")  # fullmatch


@dataclass(frozen=True)
class TopicSelection:
    """Which topics to plan: namespaces, tenants, and a regex on the full topic name."""

    tenants: tuple[str, ...] = ()
    namespaces: tuple[str, ...] = ()
    regex: str | None = None

    def __post_init__(self) -> None:
        for namespace in self.namespaces:
            if not _NAMESPACE_RE.fullmatch(namespace):
                raise ConfigError(f"--namespace {namespace!r} must be tenant/namespace")
        for tenant in self.tenants:
            if not tenant or "/" in tenant:
                raise ConfigError(f"--tenant {tenant!r} must be a tenant name")
        if self.regex is not None:
            try:
                re.compile(self.regex)
            except re.error as exc:
                raise ConfigError(
                    f"--topics-regex {self.regex!r} is not a regular expression: {exc}"
                ) from exc

    def matches(self, topic: str) -> bool:
        return self.regex is None or re.fullmatch(self.regex, topic) is not None

    def describe(self) -> str:
        parts = [f"namespace {n}" for n in self.namespaces] + [f"tenant {t}" for t in self.tenants]
        scope = ", ".join(parts) or "every tenant"
        return scope + (f", matching {self.regex!r}" if self.regex else "")


@dataclass(frozen=True)
class LiveTopic:
    name: str
    partitioned: bool


def namespaces_of(admin: PulsarAdmin, selection: TopicSelection) -> list[str]:
    """The namespaces the selection covers."""
    found = set(selection.namespaces)
    tenants = list(selection.tenants)
    if not found and not tenants:
        tenants = [t for t in admin.tenants() if t not in SYSTEM_TENANTS]
    for tenant in tenants:
        found.update(n for n in admin.namespaces(tenant) if n not in SYSTEM_NAMESPACES)
    return sorted(found)


def list_live_topics(admin: PulsarAdmin, selection: TopicSelection) -> list[LiveTopic]:
    """Persistent topics of the selection, each partitioned topic once, system topics left out."""
    found: dict[str, bool] = {}
    for namespace in namespaces_of(admin, selection):
        partitioned = set(admin.list_partitioned_topics(namespace))
        for name in partitioned:
            found[name] = True
        for name in admin.list_topics(namespace):
            base, sep, index = name.rpartition("-partition-")
            if sep and index.isdigit() and base in partitioned:
                continue
            found.setdefault(name, False)
    topics: list[LiveTopic] = []
    for name in sorted(found):
        if name.rsplit("/", 1)[-1].startswith("__") or not selection.matches(name):
            continue
        try:
            check_topic(name)
        except PlanError as exc:
            _log.warning("skipping topic: %s", exc)
            continue
        topics.append(LiveTopic(name, found[name]))
    return topics


def sample_topics(
    pulsar: PulsarSettings, topics: Sequence[LiveTopic], workers: int = 8
) -> dict[str, TopicTraffic]:
    """Current rates of every topic (partitions summed); topics that vanished are left out."""
    results = map_with_admins(pulsar, sample_topic, topics, workers)
    return {r.topic: r for r in results if r is not None}


def sample_topic(admin: PulsarAdmin, topic: LiveTopic) -> TopicTraffic | None:
    """One topic's rates from its stats, or None when the topic no longer exists."""
    rest = "persistent/" + topic.name.split("://", 1)[1]
    if topic.partitioned:
        stats = admin.request(
            "GET", f"{rest}/partitioned-stats", params={"perPartition": "true"}, ok=(200, 404)
        )
    else:
        stats = admin.request("GET", f"{rest}/stats", ok=(200, 404))
    if not isinstance(stats, dict) or "msgRateIn" not in stats:
        return None
    msg_rate, byte_rate = rates(stats)
    partitions = stats.get("metadata", {}).get("partitions", 0) if topic.partitioned else 0
    return TopicTraffic(topic.name, msg_rate, byte_rate, partitions=int(partitions or 0))


def rates(stats: dict[str, Any]) -> tuple[float, float]:
    """(msgRateIn, msgThroughputIn) of topic stats, summed over ``partitions`` when present."""
    parts = stats.get("partitions")
    sources = list(parts.values()) if isinstance(parts, dict) and parts else [stats]
    msg_rate = sum(_number(s.get("msgRateIn")) for s in sources)
    byte_rate = sum(_number(s.get("msgThroughputIn")) for s in sources)
    return msg_rate, byte_rate


def live_traffic(
    pulsar: PulsarSettings,
    store: ObservationStore,
    selection: TopicSelection,
    *,
    window: int,
    samples: int = 1,
    interval: float = 5.0,
    workers: int = 8,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> list[TopicTraffic]:
    """Sample the selected topics ``samples`` times, record the samples, return smoothed traffic."""
    if samples < 1:
        raise ConfigError(f"--samples must be >= 1, got {samples}")
    with PulsarAdmin(pulsar) as admin:
        topics = list_live_topics(admin, selection)
    if not topics:
        raise PlanError(f"no topics found in {selection.describe()} at {mask_url(pulsar.admin_url)}")
    latest: dict[str, TopicTraffic] = {}
    for round_ in range(samples):
        if round_:
            sleep(interval)
        latest = sample_topics(pulsar, topics, workers)
        store.record({t: (r.msg_rate, r.byte_rate) for t, r in latest.items()}, at=clock())
    smoothed = store.smoothed(sorted(latest), window)
    return [
        TopicTraffic(t, smoothed[t][0], smoothed[t][1], partitions=latest[t].partitions)
        for t in sorted(latest)
    ]


def _number(value: Any) -> float:
    try:
        number = float(value or 0.0)
    except (TypeError, ValueError):
        return 0.0
    return number if number > 0 and number != float("inf") else 0.0

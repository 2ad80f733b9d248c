"""Make Pulsar's partition counts match a plan: create missing topics, grow the others.

Partitions only grow (Pulsar cannot shrink a partitioned topic): a topic that already has more
partitions than planned keeps them. A topic that exists *non-partitioned* cannot be turned into a
partitioned one and is reported as skipped. Current counts are read in parallel; creations and
grows then run one by one, in topic order, through :meth:`PulsarAdmin.ensure_partitions` (which
also creates a missing tenant and namespace).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from widehouse.planner.model import Plan
from widehouse.pulsar.admin import PulsarAdmin
from widehouse.pulsar.topics import TopicName
from widehouse.settings import PulsarSettings

CREATED = "created"
GROWN = "grown"
UNCHANGED = "unchanged"
SKIPPED = "skipped"


@dataclass(frozen=True)
class PartitionChange:
    topic: str
    before: int
    """Partitions before (0: the topic did not exist, or is not partitioned)."""
    after: int
    action: str
    """created, grown, unchanged, or skipped (an existing non-partitioned topic)."""


def apply_partitions(pulsar: PulsarSettings, plan: Plan, workers: int = 8) -> list[PartitionChange]:
    """Create or grow every planned topic to its planned partition count; one change per topic."""
    topics = sorted(plan.partitions)
    current = _current_counts(pulsar, topics, workers)
    changes: list[PartitionChange] = []
    with PulsarAdmin(pulsar) as admin:
        for topic in topics:
            wanted = plan.partitions[topic]
            before, non_partitioned = current[topic]
            if non_partitioned:
                changes.append(PartitionChange(topic, 0, 0, SKIPPED))
            elif before >= wanted:
                changes.append(PartitionChange(topic, before, before, UNCHANGED))
            else:
                after = admin.ensure_partitions(TopicName.parse(topic), wanted)
                changes.append(PartitionChange(topic, before, after, CREATED if before == 0 else GROWN))
    return changes


def _current_counts(pulsar: PulsarSettings, topics: list[str], workers: int) -> dict[str, tuple[int, bool]]:
    """topic -> (partitions, exists as a non-partitioned topic)."""
    local = threading.local()
    admins: list[PulsarAdmin] = []
    guard = threading.Lock()

    def one(topic: str) -> tuple[str, tuple[int, bool]]:
        admin: PulsarAdmin | None = getattr(local, "admin", None)
        if admin is None:
            admin = PulsarAdmin(pulsar)
            local.admin = admin
            with guard:
                admins.append(admin)
        name = TopicName.parse(topic)
        count = admin.partition_count(name)
        if count > 0:
            return topic, (count, False)
        stats = admin.request("GET", f"{name.rest_path}/stats", ok=(200, 404))
        return topic, (0, isinstance(stats, dict) and "msgRateIn" in stats)

    if not topics:
        return {}
    try:
        with ThreadPoolExecutor(max_workers=max(1, min(workers, len(topics)))) as pool:
            return dict(pool.map(one, topics))
    finally:
        for admin in admins:
            admin.close()

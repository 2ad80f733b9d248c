"""Make Pulsar's partition counts match a plan: create missing topics, grow the others.

Partitions only grow (Pulsar cannot shrink a partitioned topic): a topic that already has more
partitions than planned keeps them. A topic that exists *non-partitioned* cannot be turned into a
partitioned one and is reported as skipped. Current counts are read in parallel; creations and
grows then run one by one, in topic order, through :meth:`PulsarAdmin.ensure_partitions` (which
also creates a missing tenant and namespace).
"""

from __future__ import annotations

from dataclasses import dataclass

from widehouse.planner.model import Plan
from widehouse.pulsar.admin import PulsarAdmin, map_with_admins
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

    def one(admin: PulsarAdmin, topic: str) -> tuple[str, tuple[int, bool]]:
        name = TopicName.parse(topic)
        count = admin.partition_count(name)
        if count > 0:
            return topic, (count, False)
        stats = admin.request("GET", f"{name.rest_path}/stats", ok=(200, 404))
        return topic, (0, isinstance(stats, dict) and "msgRateIn" in stats)

    return dict(map_with_admins(pulsar, one, topics, workers))

"""What a plan costs and how it changed: cores, fill, lower bounds, and moves versus the previous plan.

A *move* is a topic present in both plans whose group name changed (the streaming app reading it
changes). New and vanished topics are counted apart.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from widehouse.planner.model import Plan
from widehouse.planner.planning import lower_bound_groups
from widehouse.settings import PlannerSettings


@dataclass(frozen=True)
class Move:
    topic: str
    source: str
    target: str


@dataclass(frozen=True)
class PlanDiff:
    """How ``plan`` differs from ``previous``."""

    moved: tuple[Move, ...]
    added: tuple[str, ...]
    removed: tuple[str, ...]
    groups_added: tuple[str, ...]
    groups_removed: tuple[str, ...]
    partitions_grown: tuple[tuple[str, int, int], ...]
    """(topic, previous count, new count) for topics kept by both plans."""
    kept_topics: int
    """Topics in both plans."""

    @property
    def moved_share(self) -> float:
        """Moved topics over the topics both plans have."""
        return len(self.moved) / self.kept_topics if self.kept_topics else 0.0


def diff_plans(previous: Plan | None, plan: Plan) -> PlanDiff:
    before = previous.assignment if previous else {}
    after = plan.assignment
    common = sorted(set(before) & set(after))
    moved = tuple(Move(t, before[t], after[t]) for t in common if before[t] != after[t])
    old_groups = {g.name for g in previous.groups} if previous else set()
    new_groups = {g.name for g in plan.groups}
    grown = tuple(
        (t, previous.partitions[t], plan.partitions[t])
        for t in common
        if previous and t in previous.partitions and plan.partitions.get(t, 0) > previous.partitions[t]
    )
    return PlanDiff(
        moved=moved,
        added=tuple(sorted(set(after) - set(before))),
        removed=tuple(sorted(set(before) - set(after))),
        groups_added=tuple(sorted(new_groups - old_groups)),
        groups_removed=tuple(sorted(old_groups - new_groups)),
        partitions_grown=grown,
        kept_topics=len(common),
    )


@dataclass(frozen=True)
class PlanSummary:
    topics: int
    groups: int
    isolated_groups: int
    cores: int
    total_load: float
    lower_bound_groups: int
    """Isolated groups plus the fewest packed groups for the packed topics."""
    lower_bound_cores: int
    """``ceil(total load / slot capacity)``: every core full."""
    max_core_load: float
    mean_core_load: float

    @property
    def imbalance(self) -> float:
        """Max over mean load per core (1.0 is perfectly even)."""
        return self.max_core_load / self.mean_core_load if self.mean_core_load else 1.0


def core_loads(plan: Plan) -> list[float]:
    """Load per core: a group's load split evenly over its cores."""
    return [g.load / g.cores for g in plan.groups for _ in range(g.cores)]


def summarize(plan: Plan, settings: PlannerSettings) -> PlanSummary:
    packed = [g for g in plan.groups if not g.isolated]
    isolated = len(plan.groups) - len(packed)
    total = sum(g.load for g in plan.groups)
    per_core = core_loads(plan)
    return PlanSummary(
        topics=len(plan.assignment),
        groups=len(plan.groups),
        isolated_groups=isolated,
        cores=plan.cores,
        total_load=total,
        lower_bound_groups=isolated
        + lower_bound_groups(sum(g.load for g in packed), sum(len(g.topics) for g in packed), settings),
        lower_bound_cores=math.ceil(total / settings.slot_capacity - 1e-9),
        max_core_load=max(per_core, default=0.0),
        mean_core_load=_mean(per_core),
    )


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0

"""The replan use case: traffic (a CSV or live, smoothed Pulsar stats) -> a new plan, its moves
against the previous one, saved, and optionally its partitions applied to Pulsar.

Shared by ``widehouse plan`` (which renders the result) and the replan DAG.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from widehouse.errors import ConfigError, PlanError
from widehouse.planner.apply import PartitionChange
from widehouse.planner.io import save_plan
from widehouse.planner.model import Plan, TopicTraffic
from widehouse.planner.planning import plan
from widehouse.planner.summary import PlanDiff, diff_plans
from widehouse.planner.traffic import load_traffic_csv
from widehouse.settings import PlannerSettings, Settings


@dataclass(frozen=True)
class LiveSelection:
    """Which live topics to plan: tenants, namespaces and an optional regex over full names."""

    tenants: tuple[str, ...] = ()
    namespaces: tuple[str, ...] = ()
    topics_regex: str | None = None
    samples: int = 1
    interval: float = 0.0

    @property
    def given(self) -> bool:
        return bool(self.tenants or self.namespaces or self.topics_regex)


@dataclass(frozen=True)
class ReplanResult:
    plan: Plan
    previous: Plan | None
    diff: PlanDiff | None
    changes: list[PartitionChange] = field(default_factory=list)
    """What ``apply`` changed in Pulsar (empty when not applied)."""


def gather_traffic(
    settings: Settings, knobs: PlannerSettings, traffic_csv: Path | None, live: LiveSelection
) -> list[TopicTraffic]:
    """Per-topic traffic from a CSV file, or from live Pulsar stats smoothed over observations."""
    if traffic_csv is not None:
        if live.given:
            raise ConfigError(
                "--namespace, --tenant and --topics-regex select live topics; drop them or --traffic"
            )
        records = load_traffic_csv(traffic_csv)
        if not records:
            raise PlanError(f"traffic file {traffic_csv} lists no topics")
        return records
    from widehouse.planner.live import TopicSelection, live_traffic
    from widehouse.planner.observations import DEFAULT_KEEP, ObservationStore

    selection = TopicSelection(live.tenants, live.namespaces, live.topics_regex)
    store = ObservationStore(settings.state_dir / "planner", keep=max(DEFAULT_KEEP, knobs.smoothing))
    return live_traffic(
        settings.pulsar,
        store,
        selection,
        window=knobs.smoothing,
        samples=live.samples,
        interval=live.interval,
    )


def replan(
    settings: Settings,
    knobs: PlannerSettings,
    traffic: list[TopicTraffic],
    output: Path,
    *,
    previous: Plan | None = None,
    apply: bool = False,
) -> ReplanResult:
    """Plan from ``traffic`` (moving as few topics as possible from ``previous``, e.g.
    :func:`load_plan` of the current plan file), save it to ``output``, and with ``apply`` create or
    grow the topics' partitions in Pulsar."""
    result = plan(traffic, knobs, previous)
    save_plan(result, output)
    diff = diff_plans(previous, result) if previous else None
    changes: list[PartitionChange] = []
    if apply:
        from widehouse.planner.apply import apply_partitions

        changes = apply_partitions(settings.pulsar, result)
    return ReplanResult(result, previous, diff, changes)

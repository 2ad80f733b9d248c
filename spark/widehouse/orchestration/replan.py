"""Replan from live traffic with versioned plan files.

Every plan made here is written to ``<state>/plans/plan-<UTC time>.json`` and then becomes
``<state>/plan.json`` (atomically); earlier versions stay in ``plans/`` (a plan that was in force
before any versioned one is saved there as ``plan-<time>-previous.json``), so a bad plan is rolled
back by copying a version over ``plan.json``. The supervisor applies whatever ``plan.json`` says.

A replan that sees no traffic at all (every topic's smoothed load zero: the producers are stopped,
or the stats were read at a bad moment) is refused with :class:`NoTrafficError` before anything is
written, so the plan in force is kept; ``force=True`` plans anyway.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from widehouse.errors import ConfigError, PlanError
from widehouse.planner import Plan, TopicTraffic, load_plan, summarize
from widehouse.planner.replan import LiveSelection, ReplanResult, gather_traffic, replan
from widehouse.settings import PlannerSettings, Settings

OVERRIDABLE = ("slot_capacity", "target_fill", "isolation", "imbalance", "message_cost")


class NoTrafficError(PlanError):
    """The traffic a replan saw carries no load at all; the plan in force was kept."""


@dataclass(frozen=True)
class VersionedReplan:
    result: ReplanResult
    version: Path
    lines: tuple[str, ...]
    """Moves and balance, for the task log."""


def plans_dir(settings: Settings) -> Path:
    return settings.state_dir / "plans"


def knobs_with(settings: Settings, overrides: Mapping[str, Any]) -> PlannerSettings:
    """The environment's planner settings with the non-empty ``overrides`` applied (validated)."""
    unknown = sorted(set(overrides) - set(OVERRIDABLE))
    if unknown:
        raise ConfigError(
            f"planner override(s) {', '.join(unknown)} unknown; known: {', '.join(OVERRIDABLE)}"
        )
    given: dict[str, Any] = {k: float(v) for k, v in overrides.items() if v is not None}
    try:
        return dataclasses.replace(settings.planner, **given)
    except ConfigError as exc:
        raise ConfigError(f"planner overrides {given}: {exc}") from exc


def catalog_namespaces(settings: Settings) -> tuple[str, ...]:
    """The namespaces of this deployment's catalog topics (tenant suffix applied)."""
    from widehouse.catalog import load_catalog

    catalog = load_catalog(settings.schemas_dir)
    if settings.stream.tenant_suffix:
        catalog = catalog.relocated(settings.stream.tenant_suffix)
    return tuple(sorted({f"{t.name.tenant}/{t.name.namespace}" for t in catalog.topics}))


def check_traffic_flows(
    traffic: list[TopicTraffic], knobs: PlannerSettings, current: Path, source: str
) -> None:
    """Raise :class:`NoTrafficError` when no topic of ``traffic`` (read from ``source``) carries
    any load; the message says what happened to ``current``, the plan file in force."""
    if any(t.load(knobs) > 0 for t in traffic):
        return
    kept = f"the plan in force {current} was kept" if current.is_file() else "no plan was written"
    raise NoTrafficError(
        f"refusing to replan from no traffic: all {len(traffic)} topic(s) have zero load in "
        f"{source}; {kept}. Check that the producers are sending, or replan with force "
        "(widehouse_replan_now's form) to plan anyway"
    )


def versioned_replan(
    settings: Settings,
    knobs: PlannerSettings,
    *,
    live: LiveSelection | None = None,
    traffic_csv: Path | None = None,
    apply: bool = False,
    force: bool = False,
    now: dt.datetime | None = None,
) -> VersionedReplan:
    """Plan from traffic against the plan in force, keep every version, make it the plan in force.

    Without ``force``, traffic with no load at all raises :class:`NoTrafficError` and changes no
    file (nor Pulsar's partitions)."""
    current = settings.state_dir / "plan.json"
    selection = live or LiveSelection(namespaces=catalog_namespaces(settings))
    traffic = gather_traffic(settings, knobs, traffic_csv, LiveSelection() if traffic_csv else selection)
    if not force:
        source = (
            f"traffic file {traffic_csv}"
            if traffic_csv
            else f"live stats (median of the last {knobs.smoothing} observations)"
        )
        check_traffic_flows(traffic, knobs, current, source)
    previous: Plan | None = load_plan(current) if current.is_file() else None
    stamp = (now or dt.datetime.now(dt.UTC)).strftime("%Y%m%dT%H%M%SZ")
    versions = plans_dir(settings)
    versions.mkdir(parents=True, exist_ok=True)
    if previous is not None and not any(versions.glob("plan-*.json")):
        shutil.copyfile(current, versions / f"plan-{stamp}-previous.json")
    version = versions / f"plan-{stamp}.json"
    result = replan(settings, knobs, traffic, version, previous=previous, apply=apply)
    tmp = current.with_suffix(".json.tmp")
    shutil.copyfile(version, tmp)
    os.replace(tmp, current)
    return VersionedReplan(result, version, tuple(describe(result, knobs)))


def describe(result: ReplanResult, knobs: PlannerSettings) -> list[str]:
    s = summarize(result.plan, knobs)
    lines = [
        f"plan: {s.topics} topics in {s.groups} groups ({s.isolated_groups} isolated), {s.cores} cores; "
        f"max/mean core load {s.imbalance:.2f}, max core fill {s.max_core_load / knobs.slot_capacity:.0%}"
    ]
    diff = result.diff
    if diff is None:
        lines.append("no previous plan: every group is new")
        return lines
    lines.append(
        f"moves: {len(diff.moved)} topics ({100 * diff.moved_share:.1f}%), {len(diff.added)} new, "
        f"{len(diff.removed)} dropped; groups +{len(diff.groups_added)} -{len(diff.groups_removed)}"
    )
    lines += [f"  {m.topic}: {m.source} -> {m.target}" for m in diff.moved[:50]]
    if len(diff.moved) > 50:
        lines.append(f"  ... and {len(diff.moved) - 50} more")
    return lines

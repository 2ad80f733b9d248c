"""``widehouse plan``: plan slot groups and partitions from a traffic CSV or live Pulsar stats.

    widehouse plan --traffic FILE.csv --slot-capacity BYTES_PER_SEC [--previous PLAN.json] --output PLAN.json
    widehouse plan [--namespace T/N | --tenant T]... [--topics-regex RE] --output PLAN.json [--apply]

Planner knobs default to the ``WIDEHOUSE_PLAN_*`` settings; flags override them. Prints the groups
(load, fill, isolated topic), the totals against the lower bounds, the moves versus ``--previous``
and, with ``--apply``, what changed in Pulsar.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from typing import Any

from widehouse.commands.table import render
from widehouse.contracts import values
from widehouse.errors import ConfigError
from widehouse.planner import (
    Plan,
    PlanDiff,
    PlannerSettings,
    load_plan,
    summarize,
)
from widehouse.planner.replan import LiveSelection, gather_traffic, replan
from widehouse.settings import Settings


@values.for_argparse
def _rate(text: str) -> float:
    value = values.parse_bytes(text, problem="is not a rate; use bytes/s such as 20000000, 20M or 20MB")
    if value <= 0:
        raise values.ValueTextError(text, "must be > 0")
    return value


@values.for_argparse
def _bytes(text: str) -> float:
    return values.parse_bytes(text)


@values.for_argparse
def _fraction(text: str) -> float:
    value = values.parse_float(text)
    if not 0 < value <= 1:
        raise values.ValueTextError(text, "must be in (0, 1]")
    return value


@values.for_argparse
def _non_negative(text: str) -> float:
    return values.parse_float(text, minimum=0)


@values.for_argparse
def _positive_int(text: str) -> int:
    return values.parse_int(text, minimum=1)


# flag, PlannerSettings field, parser, help
_KNOBS: tuple[tuple[str, str, Callable[[str], Any], str], ...] = (
    ("--slot-capacity", "slot_capacity", _rate, "load one core carries, bytes/s (20M, 20MB, 20000000)"),
    ("--message-cost", "message_cost", _bytes, "bytes charged per message on top of its size"),
    ("--target-fill", "target_fill", _fraction, "share of a core's capacity groups are planned to"),
    ("--isolation", "isolation", _fraction, "share of a core above which a topic gets its own group"),
    ("--partition-capacity", "partition_capacity", _rate, "load one Pulsar partition carries, bytes/s"),
    ("--max-partitions", "max_partitions", _positive_int, "most partitions planned for a topic"),
    ("--max-group-topics", "max_group_topics", _positive_int, "most topics in a packed group"),
    ("--imbalance", "imbalance", _non_negative, "drift tolerated before a replan moves topics"),
    ("--smoothing", "smoothing", _positive_int, "live stats: median of the last N observations"),
)


_METAVARS: dict[Callable[[str], Any], str] = {
    _rate: "BYTES_PER_SEC",
    _bytes: "BYTES",
    _fraction: "FRACTION",
    _non_negative: "FRACTION",
    _positive_int: "N",
}


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "plan",
        help="plan slot groups and partitions from traffic (CSV or live Pulsar stats)",
        description="Group topics into slot groups by traffic and size their partitions. Traffic comes "
        "from --traffic FILE.csv (header topic,msg_rate,byte_rate) or, without it, from live Pulsar "
        "stats smoothed over the observations kept in the state dir. Planner settings default to the "
        "WIDEHOUSE_PLAN_* variables.",
    )
    parser.add_argument(
        "--traffic", metavar="FILE.csv", help="traffic per topic (default: live Pulsar stats)"
    )
    parser.add_argument(
        "--previous", metavar="PLAN.json", help="the plan in force: keep topics where they are"
    )
    parser.add_argument("--output", metavar="PLAN.json", required=True, help="where to write the plan")
    parser.add_argument(
        "--apply", action="store_true", help="create or grow topic partitions in Pulsar to the planned counts"
    )
    knobs = parser.add_argument_group("planner settings (default: WIDEHOUSE_PLAN_* variables)")
    for flag, field, parse, text in _KNOBS:
        knobs.add_argument(flag, dest=field, type=parse, metavar=_METAVARS[parse], help=text)
    live = parser.add_argument_group("live traffic (without --traffic)")
    live.add_argument(
        "--namespace", action="append", default=[], metavar="TENANT/NS", help="namespace to plan (repeatable)"
    )
    live.add_argument(
        "--tenant", action="append", default=[], metavar="TENANT", help="plan every namespace of a tenant"
    )
    live.add_argument("--topics-regex", metavar="RE", help="only topics whose full name matches RE")
    live.add_argument(
        "--samples", type=_positive_int, default=1, metavar="N", help="stats samples to take now (default 1)"
    )
    live.add_argument(
        "--interval",
        type=_non_negative,
        default=5.0,
        metavar="SECONDS",
        help="seconds between samples (default 5, the broker's stats interval)",
    )
    parser.add_argument(
        "--show", type=_positive_int, default=20, metavar="N", help="groups shown in the table (default 20)"
    )
    parser.set_defaults(func=run)


def planner_settings(args: argparse.Namespace, settings: Settings) -> PlannerSettings:
    """The environment's planner settings with the flags given on the command line applied."""
    overrides = {f: getattr(args, f) for _, f, _, _ in _KNOBS if getattr(args, f, None) is not None}
    try:
        return dataclasses.replace(settings.planner, **overrides)
    except ConfigError as exc:
        raise ConfigError(f"planner settings (flags over WIDEHOUSE_PLAN_*): {exc}") from exc


def run(args: argparse.Namespace, settings: Settings) -> int:
    knobs = planner_settings(args, settings)
    previous = load_plan(args.previous) if args.previous else None  # a bad file fails before any work
    live = LiveSelection(
        tuple(args.tenant), tuple(args.namespace), args.topics_regex, args.samples, args.interval
    )
    traffic = gather_traffic(settings, knobs, args.traffic, live)
    result = replan(settings, knobs, traffic, args.output, previous=previous, apply=args.apply)
    print(render_groups(result.plan, knobs, result.diff, args.show))
    print()
    print(render_totals(result.plan, knobs, result.diff, args.previous))
    print(f"wrote {args.output}")
    if args.apply:
        changes = result.changes
        counts = {
            a: sum(1 for c in changes if c.action == a) for a in ("created", "grown", "unchanged", "skipped")
        }
        print(
            f"pulsar: {counts['created']} topics created, {counts['grown']} grown, "
            f"{counts['unchanged']} unchanged, {counts['skipped']} skipped (non-partitioned)"
        )
        rows = [(c.topic, c.action, c.before, c.after) for c in changes if c.action != "unchanged"]
        if rows:
            print(render(("topic", "action", "partitions before", "after"), rows[: args.show]))
            if len(rows) > args.show:
                print(f"... {len(rows) - args.show} more")
    return 0


def human_rate(value: float) -> str:
    for unit, scale in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if value >= scale:
            return f"{value / scale:.1f} {unit}"
    return f"{value:.0f} B/s"


def render_groups(result: Plan, knobs: PlannerSettings, diff: PlanDiff | None, show: int) -> str:
    moved_in: dict[str, int] = {}
    moved_out: dict[str, int] = {}
    if diff:
        for move in diff.moved:
            moved_in[move.target] = moved_in.get(move.target, 0) + 1
            moved_out[move.source] = moved_out.get(move.source, 0) + 1
    added = set(diff.groups_added) if diff else set()
    rows = []
    for group in result.groups[:show]:
        change = ""
        if diff:
            change = "new" if group.name in added else ""
            ins, outs = moved_in.get(group.name, 0), moved_out.get(group.name, 0)
            if ins or outs:
                change = f"{change} +{ins} -{outs} moved".strip()
        rows.append(
            (
                group.name,
                group.topics[0] if group.isolated else f"{len(group.topics)} topics",
                human_rate(group.load),
                group.cores,
                f"{100 * group.fill(knobs):.0f}%",
                change,
            )
        )
    text = render(("group", "topics", "load", "cores", "fill", "vs previous"), rows)
    if len(result.groups) > show:
        text += f"\n... {len(result.groups) - show} more groups (--show N)"
    return text


def render_totals(result: Plan, knobs: PlannerSettings, diff: PlanDiff | None, previous: str | None) -> str:
    s = summarize(result, knobs)
    lines = [
        f"{s.topics} topics in {s.groups} groups ({s.groups - s.isolated_groups} packed, "
        f"{s.isolated_groups} isolated; lower bound {s.lower_bound_groups}) on {s.cores} cores "
        f"(lower bound {s.lower_bound_cores} at 100% fill)",
        f"load {human_rate(s.total_load)}; per core max {human_rate(s.max_core_load)}, "
        f"mean {human_rate(s.mean_core_load)} of {human_rate(knobs.slot_capacity)}",
    ]
    if result.isolated_topics:
        shown = ", ".join(result.isolated_topics[:5])
        more = f" and {len(result.isolated_topics) - 5} more" if len(result.isolated_topics) > 5 else ""
        lines.append(f"isolated: {shown}{more}")
    if diff is not None:
        lines.append(
            f"vs {previous}: {len(diff.moved)} topics moved ({100 * diff.moved_share:.1f}%), "
            f"{len(diff.added)} new, {len(diff.removed)} dropped; groups +{len(diff.groups_added)} "
            f"-{len(diff.groups_removed)}; partitions grown for {len(diff.partitions_grown)} topics"
        )
    return "\n".join(lines)

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

from widehouse.commands.command import add_command
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
from widehouse.settings import VARIABLES, Settings


@values.for_argparse
def _non_negative(text: str) -> float:
    return values.parse_float(text, minimum=0)


@values.for_argparse
def _positive_int(text: str) -> int:
    return values.parse_int(text, minimum=1)


def _knob(field: str) -> Callable[[str], Any]:
    """The argparse type of the planner knob ``field``: the parser of its ``WIDEHOUSE_PLAN_*``
    variable, so that the flag and the variable read the same texts (``20M`` in both)."""
    parse = next(v.parse for v in VARIABLES if v.target == f"planner.{field}")

    def knob(text: str) -> Any:
        try:
            return parse(text)
        except values.ValueTextError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        except ValueError as exc:  # the settings' own checks say what is wrong, not with what
            raise argparse.ArgumentTypeError(f"{text!r} {exc}") from None

    knob.__name__ = field
    return knob


# PlannerSettings field (the flag is --field-name), metavar, help
_KNOBS: tuple[tuple[str, str, str], ...] = (
    ("slot_capacity", "BYTES_PER_SEC", "load one core carries, bytes/s (20M, 20MB, 20000000)"),
    ("message_cost", "BYTES", "bytes charged per message on top of its size"),
    ("target_fill", "FRACTION", "share of a core's capacity groups are planned to"),
    ("isolation", "FRACTION", "share of a core above which a topic gets its own group"),
    ("partition_capacity", "BYTES_PER_SEC", "load one Pulsar partition carries, bytes/s"),
    ("max_partitions", "N", "most partitions planned for a topic"),
    ("max_group_topics", "N", "most topics in a packed group"),
    ("imbalance", "FRACTION", "drift tolerated before a replan moves topics"),
    ("smoothing", "N", "live stats: median of the last N observations"),
)


def register(subparsers: Any) -> None:
    parser = add_command(
        subparsers,
        "plan",
        run,
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
    for field, metavar, text in _KNOBS:
        flag = "--" + field.replace("_", "-")
        knobs.add_argument(flag, dest=field, type=_knob(field), metavar=metavar, help=text)
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


def planner_settings(args: argparse.Namespace, settings: Settings) -> PlannerSettings:
    """The environment's planner settings with the flags given on the command line applied."""
    overrides = {f: getattr(args, f) for f, _, _ in _KNOBS if getattr(args, f, None) is not None}
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

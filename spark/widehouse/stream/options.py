"""What a streaming run is asked to do: slot groups, run options, injected faults (pyspark-free).

Shared by the ``widehouse stream`` command and the ``spark/jobs/stream_wide.py`` entrypoint (both
parse :func:`add_arguments`; :func:`widehouse.stream.spark.job.stream` resolves and runs them), the
demo and the tests.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from widehouse.errors import ConfigError, WidehouseError


@dataclass(frozen=True)
class GroupSpec:
    """A slot group: its name (checkpoint, subscription and idempotency key) and its topics."""

    name: str
    topics: tuple[str, ...]


@dataclass(frozen=True)
class RunOptions:
    available_now: bool = False
    """Process what is in Pulsar now, then stop (tests, backfills, the demo's catch-up)."""
    duration_seconds: float | None = None
    """Stop cleanly after this long (None: run until SIGTERM)."""
    faults: tuple[Fault, ...] = ()
    starting_offsets: str = "earliest"


FAULT_POINTS = ("before-sinks", "clickhouse-insert", "after-clickhouse", "after-delta", "after-sinks")


class FaultInjected(WidehouseError):  # noqa: N818 - reads as what happened
    """Raised by a deliberately injected failure (tests of the exactly-once guarantees)."""


@dataclass(frozen=True)
class Fault:
    """A deliberately injected failure (for the exactly-once tests): ``point@batch[:kill]``."""

    point: str
    batch_id: int
    kill: bool

    @classmethod
    def parse(cls, text: str) -> Fault:
        spec, _, how = text.partition(":")
        point, _, batch = spec.partition("@")
        if point not in FAULT_POINTS or not batch.isdigit() or how not in ("", "kill", "raise"):
            raise ConfigError(
                f"--fault {text!r}: expected <point>@<batch>[:kill|:raise] with point one of "
                f"{', '.join(FAULT_POINTS)}"
            )
        return cls(point, int(batch), how == "kill")


def groups_from_plan(plan_path: Path, names: list[str] | None) -> list[GroupSpec]:
    """Slot groups from a plan file: the named ones, or all of them when ``names`` is None."""
    from widehouse.planner import load_plan

    plan = load_plan(plan_path)
    chosen = [plan.group(n) for n in names] if names else list(plan.groups)
    return [GroupSpec(g.name, tuple(g.topics)) for g in chosen]


def resolve_groups(
    state_dir: Path,
    *,
    names: list[str] | None,
    all_groups: bool = False,
    plan: Path | None = None,
    topics: str | None = None,
) -> list[GroupSpec]:
    """The slot groups a run asks for (errors name the bad argument).

    ``topics`` (comma-separated) makes an ad hoc group named by the single entry of ``names``;
    otherwise the groups come from the plan (``<state>/plan.json`` by default): the named ones, or
    every group with ``all_groups``.
    """
    if topics:
        if all_groups or not names or len(names) != 1:
            raise ConfigError("--topics needs exactly one --group NAME (the ad hoc group's name)")
        return [GroupSpec(names[0], tuple(t.strip() for t in topics.split(",") if t.strip()))]
    if not all_groups and not names:
        raise ConfigError("name the slot groups to run: --group NAME (repeatable) or --all-groups")
    plan_path = plan or state_dir / "plan.json"
    if not plan_path.is_file():
        raise ConfigError(f"--plan {plan_path}: no such file (make one with `widehouse plan`)")
    return groups_from_plan(plan_path, None if all_groups else names)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``widehouse stream`` and ``stream_wide.py``."""
    parser.add_argument(
        "--group",
        action="append",
        dest="groups",
        metavar="NAME",
        help="slot group of the plan to run (repeatable)",
    )
    parser.add_argument("--all-groups", action="store_true", help="run every group of the plan in this app")
    parser.add_argument("--plan", type=Path, help="plan JSON (default: <state>/plan.json)")
    parser.add_argument("--topics", help="ad hoc group: comma-separated topics (instead of a plan)")
    parser.add_argument(
        "--available-now", action="store_true", help="process what Pulsar holds now, then stop"
    )
    parser.add_argument("--duration", type=float, metavar="SECONDS", help="stop cleanly after this long")
    parser.add_argument(
        "--starting-offsets",
        default="earliest",
        help="where a new group starts: earliest (default), latest, or JSON per topic / partition",
    )
    parser.add_argument(
        "--fault", action="append", default=[], metavar="POINT@BATCH[:kill]", help=argparse.SUPPRESS
    )  # testing aid for the exactly-once tests


def resolve_run(args: argparse.Namespace, state_dir: Path) -> tuple[list[GroupSpec], RunOptions]:
    """The slot groups and run options that parsed :func:`add_arguments` ask for (errors name the
    bad argument); ``state_dir`` holds the default plan."""
    groups = resolve_groups(
        state_dir, names=args.groups, all_groups=args.all_groups, plan=args.plan, topics=args.topics
    )
    options = RunOptions(
        available_now=args.available_now,
        duration_seconds=args.duration,
        faults=tuple(Fault.parse(f) for f in args.fault),
        starting_offsets=args.starting_offsets,
    )
    return groups, options

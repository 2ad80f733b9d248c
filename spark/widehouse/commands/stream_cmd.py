"""``widehouse stream``: run slot groups of a plan as streaming wide-table queries.

The same arguments drive ``spark/jobs/stream_wide.py`` (the spark-submit entrypoint), so a group
runs the same from a shell, from Airflow and from a test.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from widehouse.commands.ticker import Ticker
from widehouse.settings import Settings
from widehouse.stream.options import Fault, GroupSpec, RunOptions, resolve_groups


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "stream",
        help="run slot groups as streaming jobs: Pulsar -> union of topics -> ClickHouse + Delta",
        description="Run the streaming wide-table job for slot groups of a plan (one query per group).",
    )
    add_arguments(parser)
    parser.set_defaults(func=run)


def add_arguments(parser: argparse.ArgumentParser) -> None:
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


def resolve(args: argparse.Namespace, settings: Settings) -> tuple[list[GroupSpec], RunOptions]:
    """Groups and run options from parsed arguments (the use case is the library's)."""
    groups = resolve_groups(
        settings.state_dir, names=args.groups, all_groups=args.all_groups, plan=args.plan, topics=args.topics
    )
    options = RunOptions(
        available_now=args.available_now,
        duration_seconds=args.duration,
        faults=tuple(Fault.parse(f) for f in args.fault),
        starting_offsets=args.starting_offsets,
    )
    return groups, options


def run(args: argparse.Namespace, settings: Settings) -> int:
    groups, options = resolve(args, settings)
    from widehouse.stream.spark.job import run_stream  # Spark only when it really runs

    # a drain ends by itself: show how far it got on a terminal (a running stream has its logs)
    ticker = Ticker(enabled=None if options.available_now else False)
    try:
        return run_stream(settings, groups, options, ticker.show if ticker.enabled else None)
    finally:
        ticker.done()

"""``widehouse stream``: run slot groups of a plan as streaming wide-table queries.

The arguments and how they resolve to groups and run options are the library's
(:mod:`widehouse.stream.options`), shared with ``spark/jobs/stream_wide.py`` (the spark-submit
entrypoint), so a group runs the same from a shell, from Airflow and from a test.
"""

from __future__ import annotations

import argparse
from typing import Any

from widehouse.commands.ticker import Ticker
from widehouse.settings import Settings
from widehouse.stream.options import add_arguments, resolve_run


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "stream",
        help="run slot groups as streaming jobs: Pulsar -> union of topics -> ClickHouse + Delta",
        description="Run the streaming wide-table job for slot groups of a plan (one query per group).",
    )
    add_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    groups, options = resolve_run(args, settings.state_dir)
    from widehouse.stream.spark.job import run_stream  # Spark only when it really runs

    # a drain ends by itself: show how far it got on a terminal (a running stream has its logs)
    ticker = Ticker(enabled=None if options.available_now else False)
    try:
        return run_stream(settings, groups, options, ticker.show if ticker.enabled else None)
    finally:
        ticker.done()

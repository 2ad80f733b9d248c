"""``widehouse stream``: run slot groups of a plan as streaming wide-table queries.

The arguments and how they resolve to groups and run options are the library's
(:mod:`widehouse.stream.options`), shared with ``spark/jobs/stream_wide.py`` (the spark-submit
entrypoint), so a group runs the same from a shell, from Airflow and from a test.
"""

from __future__ import annotations

import argparse
from typing import Any

from widehouse.commands.command import add_command
from widehouse.commands.ticker import Ticker
from widehouse.settings import Settings
from widehouse.stream.options import add_arguments


def register(subparsers: Any) -> None:
    parser = add_command(
        subparsers,
        "stream",
        run,
        help="run slot groups as streaming jobs: Pulsar -> union of topics -> ClickHouse + Delta",
        description="Run the streaming wide-table job for slot groups of a plan (one query per group).",
    )
    add_arguments(parser)


def run(args: argparse.Namespace, settings: Settings) -> int:
    from widehouse.stream.spark.job import stream  # Spark only when it really runs

    # a drain ends by itself: show how far it got on a terminal (a running stream has its logs)
    ticker = Ticker(enabled=None if args.available_now else False)
    try:
        return stream(args, settings, ticker.show if ticker.enabled else None)
    finally:
        ticker.done()

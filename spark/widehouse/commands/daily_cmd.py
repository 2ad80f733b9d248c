"""``widehouse daily``: merge a day of a daily wide table with its offline Hive data through HBase
and publish it (the job is ``spark/jobs/daily_merge.py``; both share these arguments).

Exit codes: 0 published, 2 bad input or a missing Hive partition of the day, 5 busy (another run
holds the day), 1 any other failure (e.g. HBase unreachable). Nothing is published unless the exit
code is 0.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from widehouse.errors import MissingInputError
from widehouse.settings import Settings

EXIT_MISSING_INPUT = 2
EXIT_BUSY = 5


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "daily",
        help="daily merge: stream day columns + offline Hive columns via HBase -> ClickHouse + Delta",
        description=__doc__.splitlines()[0],
    )
    add_daily_arguments(parser)
    parser.set_defaults(func=daily)


def add_daily_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--day", required=True, help="UTC day YYYY-MM-DD, e.g. 2026-11-22")
    parser.add_argument("--table", default="user_daily", help="daily wide table of the catalog (user_daily)")
    parser.add_argument(
        "--salt-buckets",
        type=int,
        default=None,
        help="salt buckets of the HBase day table (default WIDEHOUSE_HBASE_SALT_BUCKETS)",
    )
    parser.add_argument(
        "--offline-database", default="offline", help="Hive database of the offline tables (offline)"
    )


def daily(args: argparse.Namespace, settings: Settings) -> int:
    """Run the daily merge and print its outcome; returns the exit code."""
    from widehouse.batch.daily import DailyRequest
    from widehouse.batch.daily.spark import run_daily_job
    from widehouse.batch.lease import PeriodBusyError
    from widehouse.batch.periods import parse_day
    from widehouse.hbase.keys import check_buckets

    request = DailyRequest(
        day=parse_day(args.day),
        table=args.table,
        salt_buckets=None if args.salt_buckets is None else check_buckets(args.salt_buckets),
        offline_database=args.offline_database,
    )
    try:
        outcome = run_daily_job(settings, request)
    except MissingInputError as exc:
        print(f"widehouse daily: missing input: {exc}", file=sys.stderr)
        return EXIT_MISSING_INPUT
    except PeriodBusyError as exc:
        print(f"widehouse daily: busy: {exc}", file=sys.stderr)
        return EXIT_BUSY
    print(outcome.summary())
    return 0

"""The batch jobs as a process runs them: arguments, the use case, the outcome, the exit code.

Two doors open onto the same two use cases: the CLI (``widehouse finalize``, ``widehouse daily``)
and the spark-submit entrypoints (``spark/jobs/finalize_hour.py``, ``spark/jobs/daily_merge.py``);
both parse these arguments and call :func:`finalize` or :func:`daily`, which run the use case
(:func:`widehouse.batch.spark.run_finalize`, :func:`widehouse.batch.daily.spark.run_daily_job`),
print its outcome and return the exit code. Airflow reads the exit codes
(:mod:`widehouse.orchestration.batch`).

Finalize: 0 published, 2 bad input, 3 not ready (a feeding group's watermark is behind),
4 reconciliation mismatch (nothing published), 5 busy (another run is publishing the hour), 1 any
other failure. Daily: 0 published, 2 bad input or a missing Hive partition of the day, 5 busy
(another run holds the day), 1 any other failure; nothing is published unless the exit code is 0.

Light: Spark is imported only when a use case really runs.
"""

from __future__ import annotations

import argparse
import sys

from widehouse.contracts.identity import OFFLINE_DATABASE, parse_airflow_run
from widehouse.contracts.periods import day_argument, hour_argument
from widehouse.errors import MissingInputError, NotReadyError, ReconciliationError
from widehouse.settings import Settings

EXIT_BAD_INPUT = 2
EXIT_NOT_READY = 3
EXIT_MISMATCH = 4
EXIT_BUSY = 5
EXIT_MISSING_INPUT = EXIT_BAD_INPUT
"""A missing Hive partition is bad input to the daily merge."""


def airflow_run_argument(text: str) -> str:
    """``--airflow-run DAG_ID/RUN_ID`` (:func:`widehouse.contracts.identity.airflow_run_ref`); '' = none."""
    from widehouse.errors import ConfigError

    if not text:
        return text
    try:
        parse_airflow_run(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
    return text


def add_airflow_run(parser: argparse.ArgumentParser) -> None:
    """``--airflow-run DAG_ID/RUN_ID`` (a job that publishes records it in the ledger)."""
    parser.add_argument(
        "--airflow-run",
        type=airflow_run_argument,
        default="",
        metavar="DAG_ID/RUN_ID",
        help="the Airflow DAG run that runs this job, recorded in the ledger (the Airflow tasks pass it)",
    )


def add_finalize_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``widehouse finalize`` and ``finalize_hour.py``."""
    parser.add_argument("--table", required=True, help="hourly wide table of the catalog, e.g. user_hourly")
    parser.add_argument(
        "--hour", required=True, type=hour_argument, help="UTC hour YYYY-MM-DDTHH, e.g. 2026-11-22T09"
    )
    parser.add_argument(
        "--force", action="store_true", help="finalize even if a group's watermark is behind (recorded)"
    )
    parser.add_argument(
        "--include-late", action="store_true", help="fold the hour's late events in (a re-finalization)"
    )
    parser.add_argument(
        "--accept-mismatch", action="store_true", help="publish even if the reconciliation finds a mismatch"
    )
    parser.add_argument(
        "--no-hbase", action="store_true", help="do not refresh the day's HBase stream family"
    )
    add_airflow_run(parser)
    parser.add_argument("--fault", action="append", default=[], help=argparse.SUPPRESS)  # crash tests


def finalize(args: argparse.Namespace, settings: Settings) -> int:
    """Run the finalize use case and print its outcome; returns the exit code."""
    from widehouse.batch.finalize import FinalizeRequest
    from widehouse.batch.lease import PeriodBusyError
    from widehouse.batch.spark import run_finalize  # Spark only when it really runs

    request = FinalizeRequest(
        table=args.table,
        hour=args.hour,
        force=args.force,
        include_late=args.include_late,
        accept_mismatch=args.accept_mismatch,
        faults=tuple(args.fault),
        airflow_run=args.airflow_run,
    )
    try:
        outcome = run_finalize(settings, request, refresh_hbase=not args.no_hbase)
    except NotReadyError as exc:
        print(f"widehouse finalize: not ready: {exc}", file=sys.stderr)
        return EXIT_NOT_READY
    except ReconciliationError as exc:
        print(f"widehouse finalize: reconciliation failed: {exc}", file=sys.stderr)
        return EXIT_MISMATCH
    except PeriodBusyError as exc:
        print(f"widehouse finalize: busy: {exc}", file=sys.stderr)
        return EXIT_BUSY
    print(outcome.summary())
    return 0


def add_daily_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``widehouse daily`` and ``daily_merge.py``."""
    parser.add_argument("--day", required=True, type=day_argument, help="UTC day YYYY-MM-DD, e.g. 2026-11-22")
    parser.add_argument("--table", default="user_daily", help="daily wide table of the catalog (user_daily)")
    parser.add_argument(
        "--salt-buckets",
        type=int,
        default=None,
        help="salt buckets of the HBase day table (default WIDEHOUSE_HBASE_SALT_BUCKETS)",
    )
    parser.add_argument(
        "--offline-database", default=OFFLINE_DATABASE, help="Hive database of the offline tables (offline)"
    )
    parser.add_argument(
        "--rewrite-stream",
        action="store_true",
        help="write HBase family s even when the day's partials are what the last refresh read "
        "(after partials were removed by hand; normally such a run writes nothing there)",
    )
    add_airflow_run(parser)


def daily(args: argparse.Namespace, settings: Settings) -> int:
    """Run the daily merge and print its outcome; returns the exit code."""
    from widehouse.batch.daily import DailyRequest
    from widehouse.batch.daily.spark import run_daily_job
    from widehouse.batch.lease import PeriodBusyError
    from widehouse.hbase.keys import check_buckets

    request = DailyRequest(
        day=args.day,
        table=args.table,
        salt_buckets=None if args.salt_buckets is None else check_buckets(args.salt_buckets),
        offline_database=args.offline_database,
        rewrite_stream=args.rewrite_stream,
        airflow_run=args.airflow_run,
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


__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_BUSY",
    "EXIT_MISMATCH",
    "EXIT_MISSING_INPUT",
    "EXIT_NOT_READY",
    "add_airflow_run",
    "add_daily_arguments",
    "add_finalize_arguments",
    "airflow_run_argument",
    "daily",
    "finalize",
]

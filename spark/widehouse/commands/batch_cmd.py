"""``widehouse finalize``: publish an hour of an hourly wide table (the job is
``spark/jobs/finalize_hour.py``; both share these arguments).

Exit codes: 0 published, 2 bad input, 3 not ready (a feeding group's watermark is behind),
4 reconciliation mismatch (nothing published), 5 busy (another run is publishing the hour), 1 any
other failure.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from widehouse.errors import NotReadyError, ReconciliationError
from widehouse.settings import Settings

EXIT_NOT_READY = 3
EXIT_MISMATCH = 4
EXIT_BUSY = 5


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "finalize",
        help="finalize an hour: gate on the watermark, reconcile, publish to ClickHouse + Delta",
        description=__doc__.splitlines()[0],
    )
    add_finalize_arguments(parser)
    parser.set_defaults(func=run_finalize)


def add_finalize_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--table", required=True, help="hourly wide table of the catalog, e.g. user_hourly")
    parser.add_argument("--hour", required=True, help="UTC hour YYYY-MM-DDTHH, e.g. 2026-11-22T09")
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
    parser.add_argument("--fault", action="append", default=[], help=argparse.SUPPRESS)  # crash tests


def finalize(args: argparse.Namespace, settings: Settings) -> int:
    """Run the finalize use case and print its outcome; returns the exit code."""
    from widehouse.batch.finalize import FinalizeRequest
    from widehouse.batch.lease import PeriodBusyError
    from widehouse.batch.periods import parse_hour
    from widehouse.batch.spark import run_finalize as run  # Spark only when it really runs

    request = FinalizeRequest(
        table=args.table,
        hour=parse_hour(args.hour),
        force=args.force,
        include_late=args.include_late,
        accept_mismatch=args.accept_mismatch,
        faults=tuple(args.fault),
    )
    try:
        outcome = run(settings, request, refresh_hbase=not args.no_hbase)
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


run_finalize = finalize

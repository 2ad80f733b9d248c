"""``widehouse repair`` as a process runs it: arguments, the context from settings, the exit code.

Exit codes: 0 repaired (or nothing to repair) and every touched published period re-published;
2 bad input; 5 busy (another repair of the table runs, or a period's publisher held it too long);
3 / 4 a touched period could not be re-published (not ready / reconciliation mismatch): the repair
itself is done and recorded, and the next ``widehouse repair`` (any range) re-publishes what is left.
Light: Spark starts only if re-publishing a period needs it (a daily merge, a first registration).
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from typing import TYPE_CHECKING, Any

from widehouse.batch.jobs import EXIT_BUSY, EXIT_MISMATCH, EXIT_NOT_READY, add_airflow_run
from widehouse.contracts.periods import hour_argument, hour_text
from widehouse.errors import BatchError, NotReadyError, ReconciliationError
from widehouse.repair.core import DEFAULT_CHUNK, RepairContext, RepairOutcome, RepairRequest, repair

if TYPE_CHECKING:
    from collections.abc import Callable

    import pyarrow as pa

    from widehouse.catalog import Catalog
    from widehouse.clickhouse import ClickHouse
    from widehouse.settings import Settings

REPAIR_TXN_PREFIX = "widehouse-repair"
"""Delta ``txnAppId`` of a table's repaired partials: ``widehouse-repair:<table>``, version = chunk."""
REPAIR_GROUP = "repair"
"""``wh_group`` of repaired partial rows in Delta (the stream's rows carry their slot group)."""


def add_repair_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--table", required=True, help="wide table of the catalog, e.g. user_hourly")
    parser.add_argument(
        "--from",
        dest="first_hour",
        required=True,
        type=hour_argument,
        help="first publish hour of the quarantined messages, UTC YYYY-MM-DDTHH",
    )
    parser.add_argument(
        "--to",
        dest="last_hour",
        required=True,
        type=hour_argument,
        help="last publish hour, inclusive, UTC YYYY-MM-DDTHH",
    )
    parser.add_argument(
        "--topic", action="append", default=[], help="only this topic of the table (repeatable; default all)"
    )
    parser.add_argument(
        "--reason",
        action="append",
        default=[],
        help="only messages quarantined with this reason, e.g. wrong_type (repeatable; default any)",
    )
    parser.add_argument(
        "--chunk-size", type=int, default=DEFAULT_CHUNK, help=f"messages per chunk ({DEFAULT_CHUNK})"
    )
    parser.add_argument(
        "--no-republish",
        action="store_true",
        help="fold and record only; leave published periods to a later repair or finalize",
    )
    add_airflow_run(parser)  # the re-published periods' ledger rows name it
    parser.add_argument("--fault", action="append", default=[], help=argparse.SUPPRESS)  # crash tests


def repair_command(args: argparse.Namespace, settings: Settings) -> int:
    """Run the repair and print its outcome; returns the exit code."""
    from widehouse.batch.lease import PeriodBusyError

    request = RepairRequest(
        table=args.table,
        first_hour=args.first_hour,
        last_hour=args.last_hour,
        topics=tuple(args.topic),
        reasons=tuple(args.reason),
        chunk_size=args.chunk_size,
        republish=not args.no_republish,
        faults=tuple(args.fault),
    )
    try:
        outcome = run_repair(settings, request, airflow_run=args.airflow_run)
    except PeriodBusyError as exc:
        print(f"widehouse repair: busy: {exc}", file=sys.stderr)
        return EXIT_BUSY
    print(outcome.summary())
    return exit_code(outcome)


def exit_code(outcome: RepairOutcome) -> int:
    """0, or the code of the first period that could not be re-published (see the module docstring).
    Prints nothing: each failure was logged when it happened (stderr) and is in the summary (stdout)."""
    from widehouse.batch.lease import PeriodBusyError

    for _, error in outcome.failed:
        if isinstance(error, NotReadyError):
            return EXIT_NOT_READY
        if isinstance(error, ReconciliationError):
            return EXIT_MISMATCH
        if isinstance(error, PeriodBusyError):
            return EXIT_BUSY
        return 1
    return 0


def run_repair(settings: Settings, request: RepairRequest, *, airflow_run: str = "") -> RepairOutcome:
    """Build the context from settings (ClickHouse, Delta partials, re-publishing) and repair."""
    from widehouse.batch.spark import batch_catalog
    from widehouse.clickhouse import connect

    catalog = batch_catalog(settings)
    catalog.table(request.table)  # a clear error before anything starts
    client = connect(settings.clickhouse)
    try:
        ctx = RepairContext(
            client=client,
            catalog=catalog,
            bronze=bronze_appender(settings, catalog, request.table),
            republish=republisher(settings, client, catalog, request.table, airflow_run),
        )
        return repair(ctx, request)
    finally:
        client.close()


def bronze_appender(settings: Settings, catalog: Catalog, table: str) -> Callable[[pa.Table, int], None]:
    """Appends a chunk's partial rows to ``bronze/<table>_partials`` once (delta-rs, one writer)."""
    from widehouse.stream.bronze import BronzeWriter, bronze_tables, with_partials_meta

    writer = BronzeWriter()
    target = bronze_tables(catalog, settings.delta, (table,))[table]
    writer.ensure(target)

    def append(rows: pa.Table, chunk: int) -> None:
        data = with_partials_meta(rows, REPAIR_GROUP, chunk)
        writer.append(target, data, f"{REPAIR_TXN_PREFIX}:{table}", chunk)

    return append


def republisher(
    settings: Settings, client: ClickHouse, catalog: Catalog, table: str, airflow_run: str = ""
) -> Callable[[dt.datetime], str]:
    """Publishes one period of ``table`` again, with the flags of its newest publication (the ledger
    names ``airflow_run``, the repair's own run, as the run that published it)."""
    from widehouse.batch import ledger

    grain = catalog.table(table).grain

    def publish(period: dt.datetime) -> str:
        last: dict[str, Any] = ledger.last_entry(client, table, period) or {}
        if grain == "day":
            from widehouse.batch.daily import DailyRequest
            from widehouse.batch.daily.spark import run_daily_job

            day = DailyRequest(day=period.date(), table=table, airflow_run=airflow_run)
            return run_daily_job(settings, day).summary()
        from widehouse.batch.finalize import FinalizeRequest
        from widehouse.batch.spark import run_finalize

        hour = FinalizeRequest(
            table=table,
            hour=period,
            force=bool(last.get("forced")),
            include_late=bool(last.get("include_late")),
            accept_mismatch=last.get("reconciliation") == "accepted",
            airflow_run=airflow_run,
        )
        return run_finalize(settings, hour).summary()

    def republish(period: dt.datetime) -> str:
        try:
            return publish(period).splitlines()[0]
        except BatchError:
            raise
        except Exception as exc:  # any other failure of one period: reported, the others still run
            raise BatchError(f"re-publishing {table} {hour_text(period)} failed: {exc}") from exc

    return republish


__all__ = ["add_repair_arguments", "exit_code", "repair_command", "run_repair"]

"""The daily merge use case (Spark): :func:`run_daily` and the job wiring :func:`run_daily_job`
(steps and guarantees in :mod:`widehouse.batch.daily`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from widehouse.batch import ledger
from widehouse.batch.daily import STEPS, DailyOutcome, DailyRequest
from widehouse.batch.lease import acquire
from widehouse.batch.publish import RunInfo, SilverWriter, publish, recover
from widehouse.contracts.periods import day_start
from widehouse.errors import ConfigError, MissingInputError
from widehouse.hbase.refresh import refresh_stream_family

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from widehouse.batch.lease import Lease
    from widehouse.catalog import Catalog
    from widehouse.clickhouse import ClickHouse
    from widehouse.settings import Settings

log = logging.getLogger(__name__)
__all__ = ["STEPS", "run_daily", "run_daily_job"]


def run_daily(  # noqa: PLR0917 - what, where and how, named at call sites
    spark: SparkSession,
    settings: Settings,
    catalog: Catalog,
    client: ClickHouse,
    silver: SilverWriter,
    request: DailyRequest,
    step: Callable[[str], None] | None = None,
) -> DailyOutcome:
    """Merge and publish one day of a daily table (see the module docstring).

    ``step`` is called with each step's name (:data:`STEPS`) before it starts (tests stop services
    there), and with the publish points (``after-final``, ``after-prepare``, ``after-silver``).
    Raises MissingInputError (missing Hive input), HBaseError (HBase unreachable or failing),
    PeriodBusyError (another run holds the day for ``request.lease_wait`` seconds).
    """
    from widehouse.stream.tables import ensure_clickhouse

    step = step or (lambda _name: None)
    table = catalog.table(request.table)
    if table.grain != "day" or not table.offline:
        raise ConfigError(f"--table {table.name} is not a daily table with offline columns")
    day = request.day
    ensure_clickhouse(client, catalog)
    ledger.ensure(client)
    # the day's lease for the whole run: the hourly HBase refresh of this day waits for it
    with acquire(client, table.name, day_start(day), request.run_id, wait=request.lease_wait) as lease:
        recovered = recover(client, silver, table, day, step=step)  # before anything may stop the run
        if recovered is not None:
            log.warning("%s %s: rolled forward a prepared publication first", table.name, day)

        return _merge(spark, settings, catalog, client, silver, request, step, lease)


def _merge(  # noqa: PLR0917 - run_daily's parts, under the day's lease
    spark: SparkSession,
    settings: Settings,
    catalog: Catalog,
    client: ClickHouse,
    silver: SilverWriter,
    request: DailyRequest,
    step: Callable[[str], None],
    lease: Lease,
) -> DailyOutcome:
    """Steps 1-5 of the daily merge (the caller holds the day's lease and has recovered)."""
    from widehouse.hbase.connection import connect
    from widehouse.hbase.daytable import day_table, ensure_day_table
    from widehouse.hbase.presplit import PresplitTool
    from widehouse.hbase.spark import extract_day, write_offline_family
    from widehouse.offline.spark import missing_partitions, offline_frame

    table = catalog.table(request.table)
    day = request.day
    spec = day_table(table, settings.hbase, request.salt_buckets)
    missing = missing_partitions(spark, table, day, request.offline_database)
    if missing:
        raise MissingInputError(
            f"{table.name} {day}: the offline Hive input is not there: {', '.join(missing)} "
            "(nothing written or published)"
        )
    connection = connect(settings.hbase)  # HBaseError naming host:port when unreachable
    try:
        ensure_day_table(connection, spec, PresplitTool.from_settings(settings))
    finally:
        connection.close()

    seconds: dict[str, float] = {}
    started = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal started
        now = time.perf_counter()
        seconds[name] = now - started
        started = now

    step("refresh-stream")
    stream = refresh_stream_family(
        client, settings.hbase, table, day, buckets=spec.buckets, rewrite=request.rewrite_stream
    )
    lap("refresh-stream")
    step("write-offline")
    frame = offline_frame(spark, catalog, table, day, request.offline_database)
    offline = write_offline_family(settings.hbase, spec, frame, day)
    lap("write-offline")
    step("extract")
    # a stream: the scan runs while publish stages it (its time is in publish's ``stage``)
    rows = extract_day(spark, settings.hbase, spec, day)
    step("publish")
    run = RunInfo(
        run_id=request.run_id,
        kind="day",
        note=f"daily merge via HBase {spec.name} ({spec.buckets} salt buckets)",
        airflow_run=request.airflow_run,
    )
    result = publish(client, silver, table, day, rows, run, step=step, lease=lease)
    lap("publish")
    extracted = result.rows  # every extracted row is staged (one row per key)
    outcome = DailyOutcome(
        table.name, day, spec.name, spec.buckets, stream, offline, extracted, result, seconds
    )
    log.info("%s", outcome.summary())
    return outcome


def run_daily_job(settings: Settings, request: DailyRequest) -> DailyOutcome:
    """``widehouse daily`` / ``spark/jobs/daily_merge.py``: build the Spark session, ClickHouse client
    and Delta writer from settings, and run the daily merge."""
    from widehouse.batch.spark import DeltaSilver, batch_catalog
    from widehouse.clickhouse import connect
    from widehouse.spark.session import build_session

    catalog = batch_catalog(settings)
    catalog.table(request.table)  # a clear error before anything starts
    client = connect(settings.clickhouse)
    try:
        spark = build_session(settings, f"widehouse-daily-{request.table}")
        return run_daily(spark, settings, catalog, client, DeltaSilver(spark, settings.delta), request)
    finally:
        client.close()

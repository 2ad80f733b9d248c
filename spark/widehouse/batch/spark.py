"""The Delta silver writer (Spark: one writer engine per table, and silver tables are Spark's) and
the Spark catalog registration of the silver tables (``spark.table("widehouse.user_daily")``)."""

from __future__ import annotations

import datetime as dt
import logging
from typing import TYPE_CHECKING

from widehouse.contracts.periods import day_start

if TYPE_CHECKING:
    from collections.abc import Callable

    import pyarrow as pa
    from pyspark.sql import SparkSession

    from widehouse.batch.finalize import FinalizeOutcome, FinalizeRequest
    from widehouse.catalog import Catalog, WideTable
    from widehouse.clickhouse import ClickHouse
    from widehouse.settings import DeltaSettings, Settings

log = logging.getLogger(__name__)
SPARK_DATABASE = "widehouse"
PARTITION = "wh_date"
REFRESH_LEASE_WAIT = 900.0
"""Seconds an hourly HBase refresh waits for the day's daily merge (which holds the day's lease)."""


def silver_path(delta: DeltaSettings, table: str) -> str:
    return delta.path("silver", table)


class DeltaSilver:
    """Replaces one period of ``silver/<T>`` in a single Delta commit (``replaceWhere``), then makes
    sure the table is in the Spark catalog.

    The commit carries ``txnAppId`` = :func:`txn_app_id` (table, period) and ``txnVersion`` = the
    publication: Delta skips a write whose version is not above the last one it committed for that
    app id, so a rolled-forward publication is not written twice and an older one never replaces a
    newer one."""

    def __init__(self, spark: SparkSession | Callable[[], SparkSession], delta: DeltaSettings) -> None:
        self._spark = spark
        self.delta = delta

    @property
    def spark(self) -> SparkSession:
        """The session (built on first use when given a factory: a refused run starts no Spark)."""
        if callable(self._spark):
            self._spark = self._spark()
        return self._spark

    def replace(
        self, table: WideTable, period: dt.datetime | dt.date, rows: pa.Table, publication: int
    ) -> None:
        from pyspark.sql import functions as F  # noqa: N812

        if isinstance(period, dt.datetime):
            start = period.astimezone(dt.UTC)
            condition = f"`hour` = timestamp'{start:%Y-%m-%d %H:%M:%S}+00:00'"
        else:
            start = day_start(period)
            condition = f"`day` = date'{period.isoformat()}'"
        frame = self.spark.createDataFrame(rows)
        frame = frame.withColumn(PARTITION, F.to_date(F.col(table.period)))
        path = silver_path(self.delta, table.name)
        (
            frame.write.format("delta")
            .mode("overwrite")
            .option("replaceWhere", condition)
            .option("mergeSchema", "true")  # columns the catalog gained
            .option("txnAppId", txn_app_id(table.name, start))
            .option("txnVersion", str(publication))
            .partitionBy(PARTITION)
            .save(path)
        )
        log.info(
            "silver/%s: %s holds publication %d (%d rows; a replay is skipped)",
            table.name,
            start.isoformat(),
            publication,
            rows.num_rows,
        )
        try:
            register(self.spark, self.delta, table.name)
        except Exception as exc:
            log.warning("could not register %s.%s in the Spark catalog: %s", SPARK_DATABASE, table.name, exc)


def txn_app_id(table: str, start: dt.datetime) -> str:
    """Delta ``txnAppId`` of a period's publications (one per (table, period))."""
    return f"widehouse-publish:{table}:{start.astimezone(dt.UTC):%Y-%m-%dT%H:%M}Z"


def register(spark: SparkSession, delta: DeltaSettings, table: str) -> None:
    """``widehouse.<table>`` in the Spark catalog, over the Delta table at ``silver/<table>``."""
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {SPARK_DATABASE}")
    path = silver_path(delta, table)
    name = f"{SPARK_DATABASE}.`{table}`"
    try:
        if spark.catalog.tableExists(f"{SPARK_DATABASE}.{table}"):
            current = spark.sql(f"DESCRIBE DETAIL {name}").first()
            if current is not None and _same_location(str(current["location"]), path):
                return
            _drop_entry(spark, table)  # external: only the catalog entry goes; the root moved
    except Exception:
        _drop_entry(spark, table)
    location = path.replace("'", "\\'")
    spark.sql(f"CREATE TABLE {name} USING delta LOCATION '{location}'")


def _drop_entry(spark: SparkSession, table: str) -> None:
    """Drop the catalog entry through the session catalog: Delta's catalog would first resolve the
    table's files, which fails when they are gone."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    identifier = jvm.org.apache.spark.sql.catalyst.TableIdentifier(table, jvm.scala.Some(SPARK_DATABASE))
    spark._jsparkSession.sessionState().catalog().dropTable(identifier, True, False)


def _same_location(registered: str, path: str) -> bool:
    def plain(text: str) -> str:
        return text.removeprefix("file:").removeprefix("//").rstrip("/")

    return plain(registered) == plain(path)


def batch_catalog(settings: Settings) -> Catalog:
    """The catalog the streams use (relocated to the tenant suffix, when one is set)."""
    from widehouse.catalog import load_catalog

    catalog = load_catalog(settings.schemas_dir)
    suffix = settings.stream.tenant_suffix
    return catalog.relocated(suffix) if suffix else catalog


def run_finalize(settings: Settings, request: FinalizeRequest, refresh_hbase: bool = True) -> FinalizeOutcome:
    """``widehouse finalize``: build the context from settings and finalize one hour."""
    from widehouse.batch.finalize import BatchContext, finalize_hour
    from widehouse.clickhouse import connect
    from widehouse.pulsar.admin import PulsarAdmin
    from widehouse.spark.session import build_session

    catalog = batch_catalog(settings)
    catalog.table(request.table)  # a clear error before anything starts
    client = connect(settings.clickhouse)
    admin = PulsarAdmin(settings.pulsar)
    try:
        ctx = BatchContext(
            client=client,
            admin=admin,
            catalog=catalog,
            silver=DeltaSilver(
                lambda: build_session(settings, f"widehouse-finalize-{request.table}"), settings.delta
            ),
            app=settings.stream.app,
            plan_path=settings.state_dir / "plan.json",
            refresh_day=day_refresher(settings, client, catalog) if refresh_hbase else None,
        )
        return finalize_hour(ctx, request)
    finally:
        admin.close()
        client.close()


def day_refresher(
    settings: Settings, client: ClickHouse, catalog: Catalog, wait: float = REFRESH_LEASE_WAIT
) -> Callable[[dt.date], int]:
    """Refreshes the HBase stream family of every daily table for a day (creating a missing day
    table pre-split); returns the rows written. Each table's refresh holds that table's lease for
    the day, which the daily merge holds for its whole run: the two never interleave (a refresh
    waits up to ``wait`` seconds for a running daily merge, then raises PeriodBusyError)."""
    import uuid

    from widehouse.batch.lease import acquire
    from widehouse.hbase.day import refresh_stream_family
    from widehouse.hbase.presplit import PresplitTool

    def refresh(day: dt.date) -> int:
        presplit = PresplitTool.from_settings(settings)
        holder = f"hbase-refresh-{uuid.uuid4().hex[:12]}"
        rows = 0
        for table in catalog.wide_tables:
            if table.grain != "day":
                continue
            with acquire(client, table.name, day_start(day), holder, wait=wait):
                rows += refresh_stream_family(client, settings.hbase, table, day, presplit=presplit).rows
        return rows

    return refresh

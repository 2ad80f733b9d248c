"""The silver writer as the batch jobs use it (delta-rs commits, :mod:`widehouse.batch.silver`) and
the Spark catalog registration of the silver tables (``spark.table("widehouse.user_daily")``).

Silver tables have one writer engine, delta-rs in the batch jobs; Spark only registers and reads
them. Registering needs a Spark session (and its metastore), which finalize would otherwise never
start: :class:`DeltaSilver` registers after a commit that created the table (a new table, or the
Delta root moved), and, when it was handed a running session (the daily merge, the demo), also
whenever the catalog lacks the entry.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import TYPE_CHECKING

from widehouse.batch.silver import PARTITION, DeltaRsSilver, silver_path, txn_app_id
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
REFRESH_LEASE_WAIT = 900.0
"""Seconds an hourly HBase refresh waits for the day's daily merge (which holds the day's lease)."""
__all__ = ["PARTITION", "SPARK_DATABASE", "DeltaSilver", "register", "silver_path", "txn_app_id"]


class DeltaSilver:
    """Replaces one period of ``silver/<T>`` in a single delta-rs commit
    (:class:`~widehouse.batch.silver.DeltaRsSilver`: ``txnAppId`` = (table, period), ``txnVersion``
    = the publication; a replay or an older publication writes nothing), then makes sure the table
    is in the Spark catalog (see the module docstring for when).

    ``spark``: a session, or a factory called only when a registration is due (a finalize of an
    existing table starts no Spark); None: never register."""

    def __init__(self, spark: SparkSession | Callable[[], SparkSession] | None, delta: DeltaSettings) -> None:
        self._spark = spark
        self.delta = delta
        self.writer = DeltaRsSilver(delta)
        self.register_always = spark is not None and not callable(spark)

    @property
    def spark(self) -> SparkSession | None:
        """The session (built on first use when given a factory)."""
        if callable(self._spark):
            self._spark = self._spark()
        return self._spark

    def replace(
        self, table: WideTable, period: dt.datetime | dt.date, rows: pa.RecordBatchReader, publication: int
    ) -> None:
        commit = self.writer.replace(table, period, rows, publication)
        if not (commit.created or self.register_always) or self._spark is None:
            return
        spark = self.spark
        assert spark is not None
        try:
            # a table the commit created (new, or the root moved) is (re)pointed; otherwise only a
            # missing entry is added (the catalog lookup is cheap, DESCRIBE DETAIL reads the log)
            if commit.created or not spark.catalog.tableExists(f"{SPARK_DATABASE}.{table.name}"):
                register(spark, self.delta, table.name)
        except Exception as exc:  # the catalog entry is a convenience; the Delta commit stands
            log.warning("could not register %s.%s in the Spark catalog: %s", SPARK_DATABASE, table.name, exc)


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
    from widehouse.hbase.presplit import PresplitTool
    from widehouse.hbase.refresh import refresh_stream_family

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

"""The streaming job and the batch jobs on the standalone cluster, against hand-written rows.

1. The golden stream: the same check as tests/integration/test_golden_stream.py (every wide row and
   column in ClickHouse and Delta against tests/golden/expected.yaml, every quarantine reason, the
   per-topic counts), with the driver in client mode against ``spark://`` and the executors running
   the shipped environment.
2. Then, **at the same time**, through the one shared Hive metastore: the stream keeps running (a
   continuous app on the cluster), ``widehouse finalize`` publishes the golden stream's busiest hour
   (its first publish registers the silver table in the metastore), ``widehouse daily`` merges the
   hand-written daily fixture (tests/golden/daily.yaml: its Hive tables created by this session's
   Spark, the analyst, in the same metastore), and this session keeps reading the catalog. Before
   the shared metastore, two of these in one Derby database could not run at once. Each result
   equals its hand-written rows: the hour in ClickHouse and silver equals expected.yaml's rows of
   that hour, the day in ClickHouse and silver equals daily.yaml's expected rows.
"""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F  # noqa: N812

from tests.cluster.conftest import SparkCluster
from tests.conftest import _running
from tests.integration import daily_support as daily
from tests.integration.test_golden_stream import _deployment, _plain_rows, check_golden_stream
from widehouse import clickhouse, hbase
from widehouse.batch.silver import silver_path
from widehouse.catalog import load_catalog
from widehouse.settings import Settings, load_settings
from widehouse.stream.tables import ensure_clickhouse
from widehouse.testing.faults import kill

pytestmark = [pytest.mark.cluster, pytest.mark.integration, pytest.mark.spark]

GOLDEN_DAY = daily.fixture()
DAY = dt.date.fromisoformat(GOLDEN_DAY["day"])


@pytest.fixture
def with_hbase(services: Settings) -> Iterator[Settings]:
    """HBase and its Thrift server for the daily merge (started for this test if none answers)."""
    yield from _running(services, ["hbase", "hbase-thrift"])


def test_golden_stream_then_finalize_and_daily_at_once_through_the_shared_metastore(
    with_hbase: Settings, spark: Any, spark_cluster: SparkCluster, tmp_path: Path
) -> None:
    deployment = _deployment(tmp_path / "stream", spark_cluster.env)
    assert deployment.settings.spark.master.startswith("spark://")
    want = check_golden_stream(deployment, spark)

    # the hour to finalize: the golden stream's busiest
    hours: dict[int, int] = {}
    for _, start in want["user_hourly"]:
        hours[start] = hours.get(start, 0) + 1
    hour_ms = max(hours, key=lambda h: (hours[h], h))
    hour = dt.datetime.fromtimestamp(hour_ms / 1000, dt.UTC)

    # the daily fixture: its stream partials in its own database, its Hive tables in the metastore
    suffix = uuid.uuid4().hex[:6]
    hive_db = f"cl_off_{suffix}"
    daily_env = {
        **deployment.env,
        "WIDEHOUSE_STATE_DIR": str(tmp_path / "daily-state"),
        "WIDEHOUSE_CLICKHOUSE_DATABASE": f"cl_daily_{suffix}",
        "WIDEHOUSE_HBASE_TABLE_PREFIX": f"cl_{suffix}_",
        "WIDEHOUSE_HBASE_SALT_BUCKETS": "4",
        "WIDEHOUSE_DELTA_ROOT": str(tmp_path / "daily-delta"),
        "WIDEHOUSE_SCHEMAS_DIR": str(with_hbase.schemas_dir),
    }
    daily_env.pop("WIDEHOUSE_TENANT_SUFFIX")
    catalog = load_catalog(with_hbase.schemas_dir)
    daily_settings = load_settings(daily_env)
    daily_client = clickhouse.connect(daily_settings.clickhouse)
    ensure_clickhouse(daily_client, catalog)
    daily.insert_stream(daily_client, GOLDEN_DAY["stream"])
    daily.load_hive(spark, catalog.sql_dir, hive_db, GOLDEN_DAY["hive"])

    stream = deployment.start_stream()
    logs: dict[str, Path] = {}
    jobs: dict[str, subprocess.Popen[str]] = {}
    try:
        for name, command, env in (
            (
                "finalize",
                [
                    "finalize",
                    "--table",
                    "user_hourly",
                    "--hour",
                    f"{hour:%Y-%m-%dT%H}",
                    "--force",
                    "--no-hbase",
                ],
                deployment.env,
            ),
            (
                "daily",
                ["daily", "--table", "user_daily", "--day", DAY.isoformat(), "--offline-database", hive_db],
                daily_env,
            ),
        ):
            logs[name] = tmp_path / f"{name}.log"
            jobs[name] = subprocess.Popen(
                [sys.executable, "-m", "widehouse", *command],
                env=env,
                stdout=logs[name].open("w"),
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,
            )
        # the analyst: this session reads the catalog while both jobs use it
        deadline = time.monotonic() + 900
        seen = 0
        while any(job.poll() is None for job in jobs.values()):
            assert time.monotonic() < deadline, {n: p.read_text()[-2000:] for n, p in logs.items()}
            assert {r.tableName for r in spark.sql(f"SHOW TABLES IN `{hive_db}`").collect()} >= set(
                GOLDEN_DAY["hive"]
            )
            seen += 1
            time.sleep(1)
        for name, job in jobs.items():
            assert job.returncode == 0, f"{name}: {logs[name].read_text()[-5000:]}"
        assert stream.poll() is None, "the stream stopped while the batch jobs ran"
    finally:
        for job in jobs.values():
            kill(job)
        kill(stream)

    try:
        # the hour: expected.yaml's rows of that hour, in ClickHouse (the analyst view) and silver
        hourly = {k: v for k, v in want["user_hourly"].items() if k[1] == hour_ms}
        got = {
            (r["uid"], r["hour"]): r
            for r in deployment.clickhouse(
                f"SELECT * FROM user_hourly WHERE hour = toDateTime({hour_ms // 1000}, 'UTC')"
            )
        }
        assert _plain_rows(deployment.catalog, "user_hourly", got) == hourly
        silver = spark.read.format("delta").load(silver_path(deployment.settings.delta, "user_hourly"))
        in_hour = silver.where(F.col("hour") == F.timestamp_millis(F.lit(hour_ms))).collect()
        rows = {(r["uid"], r["hour"]): r.asDict() for r in in_hour}
        assert _plain_rows(deployment.catalog, "user_hourly", rows) == hourly

        # the day: daily.yaml's expected rows, in ClickHouse and silver
        table = catalog.table("user_daily")
        expected = daily.expected_rows(table, DAY, GOLDEN_DAY["expected"])
        assert daily.published(daily_client, DAY) == expected
        day_silver = silver_path(daily_settings.delta, "user_daily")
        frame = spark.read.format("delta").load(day_silver).where(f"day = date'{DAY.isoformat()}'")
        assert daily.normalise(frame.toArrow().to_pylist()) == expected
        assert seen > 0
    finally:
        spark.sql(f"DROP DATABASE IF EXISTS `{hive_db}` CASCADE")
        daily_client.command(f"DROP DATABASE IF EXISTS `{daily_client.database}`")
        daily_client.close()
        connection = hbase.connect(daily_settings.hbase)
        for name in connection.tables():
            if name.decode().startswith(daily_settings.hbase.table_prefix):
                connection.delete_table(name, disable=True)
        connection.close()

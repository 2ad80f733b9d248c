"""Faults on the standalone cluster: an executor JVM SIGKILLed mid-batch, then the driver SIGKILLed
mid-batch; both sinks must then hold exactly the generator's manifest (0 lost, 0 duplicated). Then
the hourly finalize job runs on the cluster too: the busiest hour, published to ClickHouse and
silver Delta, equals the manifest's rows of that hour.

Live traffic keeps batches coming while the faults are injected (it ends once they are done); the
app rides out the lost executor (the master starts another, the tasks are retried), the driver's
kill is followed by a restart from the checkpoint (``--available-now`` drain), as in the local fault
suite (bench/_fault_scenarios.py, tests/integration/test_faults.py).
"""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F  # noqa: N812

from tests.cluster.cluster_support import active_apps, executor_pids, sigkill, wait_for
from tests.cluster.conftest import SparkCluster
from widehouse import clickhouse
from widehouse.generator.manifest import diff_rows
from widehouse.settings import Settings
from widehouse.testing.faults import FaultDeployment, kill

pytestmark = [pytest.mark.cluster, pytest.mark.integration, pytest.mark.spark]


def test_an_executor_and_the_driver_sigkilled_mid_batch_lose_and_duplicate_nothing(
    services: Settings, spark: Any, spark_cluster: SparkCluster, tmp_path: Path
) -> None:
    deployment = FaultDeployment(
        tmp_path / "faults", extra_env={**spark_cluster.env, "WIDEHOUSE_STREAM_MAX_MESSAGES": "200"}
    )
    deployment.plan()
    traffic = deployment.publish_live(60_000, rate=60, seed=11)
    process = deployment.start()
    try:
        deployment.wait_commit_after(-1, process)  # running: a first batch committed
        apps = [i for i, name in active_apps(spark_cluster.local).items() if name.startswith("widehouse")]
        assert len(apps) == 1, active_apps(spark_cluster.local)
        executors = executor_pids(apps[0])
        assert executors, f"no executor JVM of {apps[0]}"

        # an executor JVM, while a batch is in flight: the app must survive it and commit again
        wait_for("a batch in flight", deployment.inside_batch)
        sigkill(executors[0])
        deployment.wait_commit_after(deployment.last_commit(), process)
        assert process.poll() is None, deployment.last_log.read_text()[-3000:]
        assert executor_pids(apps[0]) != executors  # the master started another executor

        # the driver (Python and its JVM), while a batch is in flight
        wait_for("a batch in flight", deployment.inside_batch)
        kill(process)
        assert deployment.inside_batch()  # the checkpoint holds a planned batch with no commit
    finally:
        kill(process)
    manifest = traffic.finish()
    run = deployment.drain()
    assert run.returncode == 0, run.stdout[-4000:]
    lost, duplicated, problems = deployment.compare(spark, manifest)
    assert (lost, duplicated) == (0, 0), problems
    assert manifest.counts().wide > 0

    # finalize on the cluster (forced: the hour is not past the watermark yet)
    by_hour: dict[int, dict[Any, Any]] = {}
    for (key, hour), row in manifest.expected_rows("user_hourly").items():
        by_hour.setdefault(hour, {})[(key, hour)] = row
    hour = max(by_hour, key=lambda h: len(by_hour[h]))
    text = dt.datetime.fromtimestamp(hour / 1000, dt.UTC).strftime("%Y-%m-%dT%H")
    command = ["finalize", "--table", "user_hourly", "--hour", text, "--no-hbase", "--force"]
    done = subprocess.run(
        [sys.executable, "-m", "widehouse", *command],
        env=deployment.env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-5000:]
    want = by_hour[hour]
    client = clickhouse.connect(deployment.settings.clickhouse)
    try:
        view = {
            (r["uid"], r["hour"]): r
            for r in client.query(
                f"SELECT * FROM user_hourly WHERE hour = toDateTime({hour // 1000}, 'UTC')"
            ).named_results()
        }
    finally:
        client.close()
    assert len(view) == len(want) and diff_rows(want, view) == []
    silver = spark.read.format("delta").load(deployment.settings.delta.path("silver", "user_hourly"))
    rows = {
        (r["uid"], r["hour"]): r.asDict()
        for r in silver.where(F.col("hour") == F.timestamp_millis(F.lit(hour))).collect()
    }
    assert len(rows) == len(want) and diff_rows(want, rows) == []

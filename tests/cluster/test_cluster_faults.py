"""Faults on the standalone cluster: an executor JVM SIGKILLed mid-batch, then the driver SIGKILLed
mid-batch; both sinks must then hold exactly the generator's manifest (0 lost, 0 duplicated).
(The hourly finalize on the cluster is test_cluster_stream.py's, against hand-written rows; this
test ran it a second time, ~30 s of the suite, and checked nothing the drain's comparison had not.)

Live traffic keeps batches coming while the faults are injected (it ends once they are done); the
app rides out the lost executor (the master starts another, the tasks are retried), the driver's
kill is followed by a restart from the checkpoint (``--available-now`` drain), as in the local fault
suite (bench/_fault_scenarios.py, tests/integration/test_faults.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.cluster.cluster_support import active_apps, executor_pids, sigkill, wait_for
from tests.cluster.conftest import SparkCluster
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

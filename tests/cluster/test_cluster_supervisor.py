"""The streams supervisor on the standalone cluster: two slot groups, each a detached client-mode
driver (``WIDEHOUSE_SUPERVISOR_MODE=local`` against ``spark://``); one driver SIGKILLed is seen dead
and restarted by the next cycle, and both groups commit again. (That a killed driver loses and
duplicates nothing on the cluster is test_cluster_faults.py's; a drain and compare here would add
minutes to CI for no new fact.)"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from tests.cluster.cluster_support import wait_for
from tests.cluster.conftest import SparkCluster
from widehouse.catalog import load_catalog
from widehouse.orchestration.launch import LocalLauncher
from widehouse.orchestration.supervisor import from_settings
from widehouse.planner import TopicTraffic, load_plan, plan, save_plan
from widehouse.settings import PlannerSettings, Settings
from widehouse.testing.faults import FaultDeployment

pytestmark = [pytest.mark.cluster, pytest.mark.integration, pytest.mark.spark]


def _two_groups(deployment: FaultDeployment) -> list[str]:
    catalog = load_catalog(deployment.settings.schemas_dir).relocated(deployment.suffix)
    traffic = [TopicTraffic(str(t.name), 100.0, 10_000.0) for t in catalog.topics]
    load = sum(t.load(PlannerSettings()) for t in traffic)
    knobs = PlannerSettings(slot_capacity=load / 2 / 0.8 * 1.05, target_fill=0.8, isolation=0.8)
    the_plan = plan(traffic, knobs)
    save_plan(the_plan, deployment.plan_path)
    return [g.name for g in the_plan.groups]


def test_the_supervisor_keeps_two_groups_alive_on_the_cluster(
    services: Settings, spark_cluster: SparkCluster, tmp_path: Path
) -> None:
    deployment = FaultDeployment(
        tmp_path / "supervised",
        extra_env={
            **spark_cluster.env,
            "WIDEHOUSE_SUPERVISOR_MODE": "local",
            "WIDEHOUSE_SUPERVISOR_BACKOFF_SECONDS": "0",
        },
    )
    groups = _two_groups(deployment)
    assert len(groups) == 2
    settings = deployment.settings
    the_plan = load_plan(deployment.plan_path)
    supervisor = from_settings(settings, deployment.env, runner=None)
    launcher = LocalLauncher(settings, deployment.env)
    traffic = deployment.publish_live(60_000, rate=40, seed=5)

    def committed_since(group: str, since: float) -> bool:
        return supervisor.commits().get(group, 0.0) >= since

    try:
        started = time.time()
        report = supervisor.cycle(the_plan)
        assert [report.of(g) for g in groups] == [["started"], ["started"]], report
        for group in groups:
            wait_for(f"{group} commits", lambda g=group: committed_since(g, started), 600, 1.0)
        report = supervisor.cycle(the_plan)
        assert [report.of(g) for g in groups] == [["healthy"], ["healthy"]], report

        victim, other = groups
        pid = launcher.process(victim).pid()
        assert pid is not None
        os.killpg(pid, signal.SIGKILL)  # the driver: its Python and its JVM
        wait_for(f"{victim} gone", lambda: launcher.process(victim).pid() is None, 60, 0.2)
        restarted = time.time()
        report = supervisor.cycle(the_plan)
        assert report.of(victim) == ["died", "restarted"], report
        assert report.of(other) == ["healthy"], report
        wait_for(f"{victim} commits again", lambda: committed_since(victim, restarted), 600, 1.0)
        report = supervisor.cycle(the_plan)
        assert [report.of(g) for g in groups] == [["healthy"], ["healthy"]], report
        assert not report.given_up
    finally:
        for group in groups:
            launcher.stop(group)  # at a batch boundary (SIGTERM, grace)
        traffic.finish()

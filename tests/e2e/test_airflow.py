"""Widehouse under the real Airflow 3 (``widehouse airflow up``) and the real services.

One isolated deployment (own state dir, tenants, ClickHouse database, Airflow ports and metadata
DB) for the module; runs are triggered and polled through Airflow's REST API as a user's tooling
would. Connections come from a connections file written for the deployment, so the
Connection -> ``WIDEHOUSE_*`` path is the one under test.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.airflow_support import AirflowApi
from tests.integration.stream_support import Deployment, expected
from widehouse.generator.manifest import diff_rows
from widehouse.settings import Settings

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.slow]

PORTS = {
    "WIDEHOUSE_AIRFLOW_PORT": "18080",
    "WIDEHOUSE_AIRFLOW_WORKER_LOG_PORT": "18793",
    "WIDEHOUSE_AIRFLOW_TRIGGERER_LOG_PORT": "18794",
}
ROOT = Path(__file__).parents[2]


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory, services: Settings) -> Deployment:
    root = tmp_path_factory.mktemp("airflow-e2e")
    dep = Deployment(root)
    conns = json.loads((ROOT / "docker" / "airflow" / "dev-connections.json").read_text())
    conns["widehouse_clickhouse"]["schema"] = f"wh_{dep.suffix}"
    (root / "connections.json").write_text(json.dumps(conns))
    dep.extra_env.update(
        {
            **PORTS,
            "WIDEHOUSE_AIRFLOW_CONNECTIONS_FILE": str(root / "connections.json"),
            "WIDEHOUSE_SUPERVISOR_STALE_SECONDS": "900",
            "WIDEHOUSE_SUPERVISOR_STARTUP_SECONDS": "900",
            "WIDEHOUSE_STREAM_STOP_GRACE_SECONDS": "20",
            "WIDEHOUSE_STREAM_MAX_MESSAGES": "500",
        }
    )
    return dep


@pytest.fixture(scope="module")
def airflow(deployment: Deployment) -> Iterator[AirflowApi]:
    cli = [sys.executable, "-m", "widehouse", "airflow"]
    up = subprocess.run(
        [*cli, "up"], env=deployment.env, capture_output=True, text=True, timeout=900, check=False
    )
    try:
        assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
        assert "Airflow UI: http://127.0.0.1:18080" in up.stdout
        settings = deployment.settings
        yield AirflowApi(settings.airflow.url, settings.airflow.user, settings.airflow.password)
    finally:
        subprocess.run([*cli, "down"], env=deployment.env, timeout=300, check=False)
        from widehouse.orchestration.launch import LocalLauncher

        for group_dir in (deployment.settings.state_dir / "streams").glob("*"):
            LocalLauncher(deployment.settings).stop(group_dir.name)  # detached: outlives Airflow


def test_trigger_form_params_as_served_by_the_rest_api(airflow: AirflowApi) -> None:
    airflow.wait_dag("widehouse_refinalize")
    params = airflow.get("/dags/widehouse_refinalize/details")["params"]
    table = params["table"]
    assert table["value"] == "user_hourly"
    assert table["schema"]["type"] == "string" and table["schema"]["enum"] == ["user_hourly"]
    assert table["schema"]["section"] == "What" and table["schema"]["title"] == "Wide table"
    assert params["first_hour"]["value"] is None
    assert params["first_hour"]["schema"] == {
        "type": ["null", "string"],
        "format": "date-time",
        "title": "First hour",
        "section": "Hours",
    }
    for flag in ("include_late", "accept_mismatch", "force"):
        assert params[flag]["value"] is False and params[flag]["schema"]["type"] == "boolean"
    replan = airflow.get("/dags/widehouse_replan_now/details")["params"]
    assert replan["target_fill"]["schema"]["type"] == ["null", "number"]
    assert replan["target_fill"]["schema"]["maximum"] == 1 and replan["target_fill"]["value"] is None


def test_supervisor_starts_a_group_and_restarts_it_after_sigkill_exactly(
    airflow: AirflowApi, deployment: Deployment
) -> None:
    manifest = deployment.publish(5000, seed=7)
    groups = deployment.plan_groups(groups=1)
    (deployment.settings.state_dir).mkdir(parents=True, exist_ok=True)
    (deployment.settings.state_dir / "plan.json").write_text(deployment.plan_path.read_text())
    group = "g001"
    assert len(groups) == 1

    airflow.wait_dag("widehouse_streams")
    run = airflow.trigger("widehouse_streams")
    assert airflow.wait_run("widehouse_streams", run) == "success"
    log = airflow.task_log("widehouse_streams", run, "supervise")
    pid_file = deployment.settings.state_dir / "streams" / group / "stream.pid"
    first_pid = int(pid_file.read_text().split()[0])
    # this run or the scheduled one unpausing created started it; either way it is supervised now
    assert any(f"{group}: {what}" in log for what in ("started", "starting", "healthy")), log[-2000:]
    assert "cycle took" in log
    wait_for_commit(deployment, group, after=0.0)

    os.killpg(first_pid, signal.SIGKILL)  # mid-stream: batches of 500 of the 5,000 messages
    killed_at = time.time()
    while True:  # the scheduled cycle (every 3 min) or this manual one restarts it
        run = airflow.trigger("widehouse_streams")
        assert airflow.wait_run("widehouse_streams", run) == "success"
        if pid_file.exists() and int(pid_file.read_text().split()[0]) != first_pid:
            break
        assert time.time() - killed_at < 600, "not restarted"
    print(f"SIGKILL -> restarted process: {pid_file.stat().st_mtime - killed_at:.1f}s")

    want = expected(manifest)
    deadline = time.monotonic() + 900
    while True:
        problems = {t: diff_rows(rows, deployment.clickhouse_rows(t)) for t, rows in want.items()}
        if not any(problems.values()):
            break
        assert time.monotonic() < deadline, problems
        time.sleep(10)


def test_a_manual_operation_with_params_runs(airflow: AirflowApi, deployment: Deployment) -> None:
    airflow.wait_dag("widehouse_retire_app")
    run = airflow.trigger("widehouse_retire_app", {"group": "gone01"})
    assert airflow.wait_run("widehouse_retire_app", run) == "success"
    log = airflow.task_log("widehouse_retire_app", run, "retire")
    assert (
        f"widehouse pulsar cleanup --retire widehouse-gone01 --namespace bigolive-{deployment.suffix}" in log
    )
    assert "subscription(s) removed" in log
    bad = airflow.trigger("widehouse_retire_app", {"group": "g001"})  # still in the plan: refused
    assert airflow.wait_run("widehouse_retire_app", bad) == "failed"


def wait_for_commit(deployment: Deployment, group: str, after: float, timeout: float = 600) -> float:
    deadline = time.monotonic() + timeout
    while True:
        rows = (
            deployment.clickhouse(
                "SELECT toUnixTimestamp64Milli(max(committed_at)) AS at FROM stream_progress "
                f"WHERE `group` = '{group}'"
            )
            if _progress_exists(deployment)
            else []
        )
        at = (rows[0]["at"] or 0) / 1000 if rows else 0.0
        if at > after:
            return float(at)
        assert time.monotonic() < deadline, f"{group} committed nothing"
        time.sleep(5)


def _progress_exists(deployment: Deployment) -> bool:
    return bool(deployment.clickhouse("EXISTS TABLE stream_progress")[0]["result"])

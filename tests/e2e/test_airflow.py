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
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.airflow_support import AirflowApi
from tests.integration.stream_support import GIFT, Deployment, expected, gift_message
from widehouse.generator.manifest import Manifest, diff_rows
from widehouse.orchestration.params import DATE_TIME_PATTERN
from widehouse.planner import Group, load_plan, save_plan
from widehouse.settings import Settings

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.slow]

PORTS = {
    "WIDEHOUSE_AIRFLOW_PORT": "18080",
    "WIDEHOUSE_AIRFLOW_WORKER_LOG_PORT": "18793",
    "WIDEHOUSE_AIRFLOW_TRIGGERER_LOG_PORT": "18794",
}
ROOT = Path(__file__).parents[2]
NEW_UID = 990_001
"""A user the generator never makes (its users are 1..200 of each deployment)."""


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


@pytest.fixture(scope="module")
def traffic(deployment: Deployment) -> Manifest:
    """5,000 generated messages and a one-group plan over every topic, in the supervisor's place."""
    manifest = deployment.publish(5000, seed=7)
    assert len(deployment.plan_groups(groups=1)) == 1
    deployment.settings.state_dir.mkdir(parents=True, exist_ok=True)
    (deployment.settings.state_dir / "plan.json").write_text(deployment.plan_path.read_text())
    return manifest


def test_trigger_form_params_as_served_by_the_rest_api(airflow: AirflowApi) -> None:
    airflow.wait_dag("widehouse_refinalize")
    params = airflow.get("/dags/widehouse_refinalize/details")["params"]
    table = params["table"]
    assert table["value"] == "user_hourly"
    assert table["schema"]["type"] == "string" and table["schema"]["enum"] == ["user_hourly"]
    assert table["schema"]["section"] == "What" and table["schema"]["title"] == "Wide table"
    assert params["first_hour"]["value"] is None  # required: no default
    assert params["first_hour"]["schema"] == {
        "type": "string",
        "format": "date-time",
        "pattern": DATE_TIME_PATTERN,
        "title": "First hour",
        "section": "Hours",
    }
    # the REST trigger refuses what the task would refuse, before any run exists
    for conf, why in (({"first_hour": "2026-11-22 9h"}, "2026-11-22 9h"), ({}, "No value passed")):
        reply = airflow.session.post(
            f"{airflow.url}/api/v2/dags/widehouse_refinalize/dagRuns",
            json={"logical_date": None, "conf": conf},
            timeout=60,
        )
        assert reply.status_code == 400, (conf, reply.status_code, reply.text)
        assert "param first_hour" in reply.text and why in reply.text, reply.text
    for flag in ("include_late", "accept_mismatch", "force"):
        assert params[flag]["value"] is False and params[flag]["schema"]["type"] == "boolean"
    replan = airflow.get("/dags/widehouse_replan_now/details")["params"]
    assert replan["target_fill"]["schema"]["type"] == ["null", "number"]
    assert replan["target_fill"]["schema"]["maximum"] == 1 and replan["target_fill"]["value"] is None
    assert replan["force"]["value"] is False and replan["force"]["schema"]["type"] == "boolean"


def test_supervisor_starts_a_group_and_restarts_it_after_sigkill_exactly(
    airflow: AirflowApi, deployment: Deployment, traffic: Manifest
) -> None:
    manifest = traffic
    group = "g001"

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

    wait_exact(deployment, manifest)


def test_a_replan_that_moves_a_topic_stays_exact(
    airflow: AirflowApi, deployment: Deployment, traffic: Manifest
) -> None:
    """gift_send moves from g001 to a new group g002 while the supervisor runs g001: g001 is stopped
    (a batch the stop cut is finished on its old topics first) and restarted without it; g002 starts
    after g001's committed position. Every generated row stays exact (a re-read would double the
    gift columns), and g002 reads exactly the two gifts sent after it started. Sums by hand."""
    airflow.wait_dag("widehouse_streams")
    run = airflow.trigger("widehouse_streams")  # g001 runs (started here if this test runs alone)
    assert airflow.wait_run("widehouse_streams", run) == "success"
    wait_exact(deployment, traffic)

    streams = deployment.settings.state_dir / "streams"
    g001_pid = int((streams / "g001" / "stream.pid").read_text().split()[0])  # before the plan changes
    ts = int(time.time() * 1000) - 30_000
    before = [gift_message(NEW_UID, ts + i, d) for i, d in enumerate((10, 99, 1314))]
    deployment.publish_messages(before)
    # g001 reads them before the plan changes: left unread at its stop they would be g002's, and the
    # assertion that g002 reads only what came after it would depend on g001's trigger timing
    deadline = time.monotonic() + 300
    while _gifts(deployment) != (3, 10 + 99 + 1314):
        assert time.monotonic() < deadline, f"g001 did not read the gifts: {_gifts(deployment)}"
        time.sleep(2)
    names = {origin: name for name, origin in deployment.topic_origins.items()}
    gift = names[GIFT]
    old = load_plan(deployment.settings.state_dir / "plan.json")
    (g001,) = old.groups
    moved = replace(
        old,
        groups=(
            replace(g001, topics=tuple(t for t in g001.topics if t != gift)),
            Group("g002", (gift,), 1.0, 1),
        ),
        next_group=3,
    )
    save_plan(moved, deployment.settings.state_dir / "plan.json")

    moved_at = time.time()
    while True:  # this manual cycle or the scheduled one (every 3 min) applies the plan
        run = airflow.trigger("widehouse_streams")
        state = airflow.wait_run("widehouse_streams", run)
        log = airflow.task_log("widehouse_streams", run, "supervise")
        g002 = streams / "g002" / "stream.pid"
        if g002.exists() and int((streams / "g001" / "stream.pid").read_text().split()[0]) != g001_pid:
            break
        assert time.time() - moved_at < 600, f"{state}: {log[-3000:]}"
    assert state == "success", log[-3000:]
    after = [gift_message(NEW_UID, int(time.time() * 1000) + i, d) for i, d in enumerate((7, 1))]
    deployment.publish_messages(after)  # only g002 reads gift_send now

    deadline = time.monotonic() + 900
    while (gifts := _gifts(deployment))[0] != 5:
        assert time.monotonic() < deadline, f"the moved topic's gifts did not all arrive: {gifts}"
        time.sleep(10)
    assert gifts[1] == 10 + 99 + 1314 + 7 + 1
    read = deployment.clickhouse(
        "SELECT sum(rows_in) AS n FROM stream_progress FINAL WHERE `group` = 'g002' AND topic != '*'"
    )
    assert read[0]["n"] == 2  # only the gifts sent after it started: nothing of g001's re-read
    wait_exact(deployment, traffic, timeout=120)


def _generated(rows: dict[tuple[Any, Any], dict[str, Any]]) -> dict[tuple[Any, Any], dict[str, Any]]:
    """The rows of the generator's users (the replan test's hand-written user is checked apart)."""
    return {key: row for key, row in rows.items() if int(key[0]) != NEW_UID}


def _gifts(deployment: Deployment) -> tuple[int, int]:
    """NEW_UID's gifts and diamonds sent, merged over every hour (ClickHouse)."""
    rows = deployment.clickhouse(
        "SELECT sum(gifts_sent) AS n, sum(gift_diamonds_sent) AS d FROM user_hourly_merged "
        f"WHERE uid = {NEW_UID}"
    )
    return (int(rows[0]["n"] or 0), int(rows[0]["d"] or 0)) if rows else (0, 0)


def wait_exact(deployment: Deployment, manifest: Manifest, timeout: float = 900) -> None:
    """Wait until every wide table's rows equal the manifest's (ClickHouse, merged partials)."""
    want = expected(manifest)
    deadline = time.monotonic() + timeout
    while True:
        problems = {t: diff_rows(rows, _generated(deployment.clickhouse_rows(t))) for t, rows in want.items()}
        problems = {t: p for t, p in problems.items() if p}
        if not problems:
            return
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

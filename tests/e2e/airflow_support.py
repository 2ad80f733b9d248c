"""Airflow's REST API as the end-to-end tests drive it: log in, unpause, trigger, poll, read logs."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import requests


class AirflowApi:
    def __init__(self, url: str, user: str, password: str) -> None:
        self.url = url
        token = requests.post(f"{url}/auth/token", json={"username": user, "password": password}, timeout=30)
        token.raise_for_status()
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {token.json()['access_token']}"

    def get(self, path: str) -> Any:
        reply = self.session.get(f"{self.url}/api/v2{path}", timeout=60)
        reply.raise_for_status()
        return reply.json()

    def wait_dag(self, dag_id: str, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while self.session.get(f"{self.url}/api/v2/dags/{dag_id}", timeout=60).status_code != 200:
            assert time.monotonic() < deadline, f"{dag_id} never parsed"
            time.sleep(3)
        self.session.patch(f"{self.url}/api/v2/dags/{dag_id}", json={"is_paused": False}, timeout=60)

    def trigger(self, dag_id: str, conf: dict[str, Any] | None = None) -> str:
        reply = self.session.post(
            f"{self.url}/api/v2/dags/{dag_id}/dagRuns",
            json={"logical_date": None, "conf": conf or {}},
            timeout=60,
        )
        assert reply.status_code == 200, reply.text
        return str(reply.json()["dag_run_id"])

    def wait_run(self, dag_id: str, run_id: str, timeout: float = 900) -> str:
        deadline = time.monotonic() + timeout
        while True:
            state = str(self.get(f"/dags/{dag_id}/dagRuns/{run_id}")["state"])
            if state in ("success", "failed"):
                return state
            assert time.monotonic() < deadline, f"{dag_id} {run_id} still {state}"
            time.sleep(3)

    def task_log(self, dag_id: str, run_id: str, task_id: str) -> str:
        body = self.get(f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/1?full_content=true")
        content = body.get("content", "")
        if isinstance(content, list):
            return "\n".join(str(e.get("event", e)) if isinstance(e, dict) else str(e) for e in content)
        return str(content)

    def runs(self, dag_id: str) -> list[dict[str, Any]]:
        """Every run of ``dag_id`` (newest first)."""
        return list(self.get(f"/dags/{dag_id}/dagRuns?limit=100&order_by=-logical_date")["dag_runs"])

    def run_for(self, dag_id: str, logical: dt.datetime, timeout: float = 600) -> dict[str, Any]:
        """The run of ``dag_id`` whose logical date is ``logical`` (waits until the scheduler made it)."""
        deadline = time.monotonic() + timeout
        while True:
            for run in self.runs(dag_id):
                if run["logical_date"] and parse_time(run["logical_date"]) == logical:
                    return run
            assert time.monotonic() < deadline, f"no {dag_id} run for {logical.isoformat()}"
            time.sleep(5)


def parse_time(text: str) -> dt.datetime:
    """An API timestamp (ISO 8601, ``Z`` allowed) as an aware datetime."""
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))

"""``widehouse airflow backfill`` retries ``airflow backfill create`` only while SQLite is busy."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from widehouse.services.airflow_backfill import backfill_create
from widehouse.settings import load_settings

LOCKED_OUTPUT = "sqlalchemy.exc.OperationalError: (sqlite3.OperationalError) database is locked\n"


class Scripted:
    """Answers each call with the next (exit code, output) and records the commands."""

    def __init__(self, *answers: tuple[int, str]) -> None:
        self.answers = list(answers)
        self.commands: list[list[str]] = []
        self.envs: list[dict[str, str]] = []

    def __call__(self, command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        self.commands.append(command)
        self.envs.append(kwargs["env"])
        code, out = self.answers.pop(0)
        return subprocess.CompletedProcess(command, code, out, "")


def _airflow(tmp_path: Path) -> Any:
    return load_settings({"WIDEHOUSE_STATE_DIR": str(tmp_path)}).airflow


def test_a_busy_metadata_db_is_retried_until_the_backfill_is_created(tmp_path: Path) -> None:
    runner = Scripted((1, LOCKED_OUTPUT), (1, LOCKED_OUTPUT), (0, "Created backfill Dag run.\n"))
    said: list[str] = []
    args = ["--dag-id", "widehouse_hourly", "--from-date", "2026-11-22T09:00:00+00:00"]
    code = backfill_create(_airflow(tmp_path), args, pause_s=0, run=runner, report=said.append)
    assert code == 0
    assert len(runner.commands) == 3
    assert runner.commands[0][-6:] == ["backfill", "create", *args]
    assert runner.envs[0]["AIRFLOW_HOME"] == str(tmp_path / "airflow")
    assert any("attempt 2/6" in line and "nothing was created" in line for line in said)


def test_other_failures_are_not_retried_and_a_db_busy_for_good_gives_up(tmp_path: Path) -> None:
    bad_dag = Scripted((1, "airflow.exceptions.DagNotFound: Dag 'nope' could not be found\n"))
    assert (
        backfill_create(_airflow(tmp_path), ["--dag-id", "nope"], pause_s=0, run=bad_dag, report=print) == 1
    )
    assert len(bad_dag.commands) == 1
    busy = Scripted(*[(1, LOCKED_OUTPUT)] * 3)
    said: list[str] = []
    code = backfill_create(
        _airflow(tmp_path), ["--dag-id", "x"], attempts=3, pause_s=0, run=busy, report=said.append
    )
    assert code == 1 and len(busy.commands) == 3
    assert "stayed busy for 3 attempts" in said[-1]

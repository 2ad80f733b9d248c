"""Gate use, finalize/daily exit codes, hour ranges, Hive partition probe (no services)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from widehouse.errors import ConfigError, JobFailedError
from widehouse.orchestration import batch
from widehouse.orchestration.runner import JobResult

H9 = dt.datetime(2026, 11, 22, 9, tzinfo=dt.UTC)


@dataclass(frozen=True)
class FakeGate:
    ready: bool
    needed: dt.datetime
    groups: dict[str, dt.datetime | None]
    message: str = ""


class Recorder:
    def __init__(self, code: int = 0) -> None:
        self.code = code
        self.calls: list[tuple[list[str], dict[str, str]]] = []

    def __call__(self, args: Sequence[str], env: Mapping[str, str]) -> JobResult:
        self.calls.append((list(args), dict(env)))
        return JobResult(("widehouse", *args), self.code, "line 1\nlast line")


def test_the_gate_is_asked_for_the_run_hour_and_says_what_it_waits_for() -> None:
    asked = []
    needed = H9 + dt.timedelta(hours=2)

    def gate(settings: object, catalog: object, table: str, hour: dt.datetime) -> FakeGate:
        asked.append((table, hour))
        return FakeGate(False, needed, {"g001": needed + dt.timedelta(minutes=1), "g002": None})

    verdict = batch.check_gate(
        None, None, "user_hourly", H9.astimezone(dt.timezone(dt.timedelta(hours=8))), gate
    )
    assert asked == [("user_hourly", H9)]
    assert not verdict.ready
    assert (
        "g002 at nothing committed" in verdict.message and "g001" not in verdict.message.split("waiting")[1]
    )


def test_a_ready_gate() -> None:
    def gate(settings: object, catalog: object, table: str, hour: dt.datetime) -> FakeGate:
        return FakeGate(True, hour, {"g001": hour}, "ready")

    assert batch.check_gate(None, None, "user_hourly", H9, gate) == batch.GateVerdict(True, "ready")


def test_finalize_arguments_and_success() -> None:
    runner = Recorder(0)
    batch.finalize_job(runner, {"WIDEHOUSE_X": "1"}, "user_hourly", H9, include_late=True)
    assert runner.calls == [
        (
            ["finalize", "--table", "user_hourly", "--hour", "2026-11-22T09", "--include-late"],
            {"WIDEHOUSE_X": "1"},
        )
    ]


@pytest.mark.parametrize(
    ("code", "retryable", "words"),
    [
        (1, True, "failed"),
        (2, False, "bad input"),
        (3, True, "not ready"),
        (4, False, "accept_mismatch"),
        (5, True, "busy: another run holds the period"),
    ],
)
def test_finalize_exit_codes(code: int, retryable: bool, words: str) -> None:
    with pytest.raises(JobFailedError) as info:
        batch.finalize_job(Recorder(code), {}, "user_hourly", H9)
    assert info.value.code == code and info.value.retryable is retryable
    assert words in str(info.value) and "last line" in str(info.value) and "2026-11-22T09" in str(info.value)


def test_daily_exit_codes() -> None:
    recorder = Recorder(0)
    batch.daily_job(recorder, {}, dt.date(2026, 11, 22))
    batch.daily_job(recorder, {}, dt.date(2026, 11, 22), rewrite_stream=True)
    assert [call[0] for call in recorder.calls] == [
        ["daily", "--day", "2026-11-22"],
        ["daily", "--day", "2026-11-22", "--rewrite-stream"],
    ]
    with pytest.raises(JobFailedError, match="daily 2026-11-22: exit code 2, bad input") as info:
        batch.daily_job(Recorder(2), {}, dt.date(2026, 11, 22))
    assert not info.value.retryable


def test_hour_arg_is_a_whole_utc_hour() -> None:
    assert batch.hour_arg(H9) == "2026-11-22T09"
    assert batch.hour_arg(dt.datetime(2026, 11, 22, 9)) == "2026-11-22T09"  # naive means UTC
    with pytest.raises(ConfigError, match="must be the start of an hour"):
        batch.hour_arg(H9 + dt.timedelta(minutes=5))


def test_unfinalized_hours_uses_the_ledger() -> None:
    def missing(client: object, table: str, day: dt.date) -> list[dt.datetime]:
        return [H9] if table == "user_hourly" else []

    assert batch.unfinalized_hours(None, ["user_hourly", "other"], H9.date(), missing) == {
        "user_hourly": [H9]
    }


def test_missing_hive_partitions_of_a_local_warehouse(tmp_path: Path) -> None:
    (tmp_path / "offline.db" / "payments" / "dt=2026-11-22").mkdir(parents=True)
    day = dt.date(2026, 11, 22)
    found = batch.missing_hive_partitions(str(tmp_path), "offline", ["payments", "user_profile"], day)
    assert found == ["offline.user_profile/dt=2026-11-22"]
    assert batch.missing_hive_partitions(f"file://{tmp_path}", "offline", ["payments"], day) == []
    assert batch.missing_hive_partitions("hdfs:///warehouse", "offline", ["payments"], day) == []


def test_the_airflow_run_is_passed_to_finalize_and_daily_when_there_is_one() -> None:
    runner = Recorder(0)
    batch.finalize_job(
        runner, {}, "user_hourly", H9, force=True, airflow_run="widehouse_refinalize/manual__2026-11-22"
    )
    batch.daily_job(runner, {}, dt.date(2026, 11, 22), airflow_run="widehouse_daily/scheduled__2026-11-22")
    batch.finalize_job(runner, {}, "user_hourly", H9, airflow_run="")  # not run by Airflow: no flag
    assert [call[0] for call in runner.calls] == [
        [
            *("finalize", "--table", "user_hourly", "--hour", "2026-11-22T09", "--force"),
            *("--airflow-run", "widehouse_refinalize/manual__2026-11-22"),
        ],
        ["daily", "--day", "2026-11-22", "--airflow-run", "widehouse_daily/scheduled__2026-11-22"],
        ["finalize", "--table", "user_hourly", "--hour", "2026-11-22T09"],
    ]


def test_outside_a_running_task_there_is_no_airflow_run() -> None:
    from widehouse.orchestration.tasks import current_airflow_run

    assert current_airflow_run() == ""


def test_the_jobs_take_and_check_the_airflow_run() -> None:
    import argparse

    from widehouse.batch.jobs import add_daily_arguments, add_finalize_arguments

    finalize = argparse.ArgumentParser(exit_on_error=False)
    add_finalize_arguments(finalize)
    base = ["--table", "user_hourly", "--hour", "2026-11-22T09"]
    assert finalize.parse_args(base).airflow_run == ""
    run = "widehouse_hourly/scheduled__2026-11-22T09:00:00+00:00"
    assert finalize.parse_args([*base, "--airflow-run", run]).airflow_run == run
    daily = argparse.ArgumentParser(exit_on_error=False)
    add_daily_arguments(daily)
    assert daily.parse_args(["--day", "2026-11-22", "--airflow-run", "d/r"]).airflow_run == "d/r"
    for bad in ("no-slash", "bad dag/r", "d/", "d/with space"):
        with pytest.raises(argparse.ArgumentError, match="Airflow"):
            finalize.parse_args([*base, "--airflow-run", bad])

"""Pure pieces of the repair: the request's checks, the re-parse of stored messages (hand-written
payloads, the real catalog), the exit codes, the Airflow arguments."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import orjson
import pyarrow as pa
import pytest

from widehouse.batch.late import table_plan
from widehouse.batch.lease import PeriodBusyError
from widehouse.catalog import load_catalog
from widehouse.errors import ConfigError, NotReadyError, ReconciliationError
from widehouse.orchestration.batch import repair_args
from widehouse.repair.core import RepairOutcome, RepairRequest, check_request, fold_messages
from widehouse.repair.job import exit_code

ROOT = Path(__file__).resolve().parents[3]
CATALOG = load_catalog(ROOT / "schemas")
LOGIN = "persistent://bigolive/app/login"
H9 = dt.datetime(2026, 11, 22, 9, tzinfo=dt.UTC)
MS9 = int(H9.timestamp() * 1000)


def _request(**changes: object) -> RepairRequest:
    fields: dict[str, object] = {"table": "user_hourly", "first_hour": H9, "last_hour": H9, **changes}
    return RepairRequest(**fields)  # type: ignore[arg-type]


def test_the_request_is_checked_and_names_what_is_wrong() -> None:
    topics = check_request(CATALOG, _request())
    assert LOGIN in topics and len(topics) > 1  # none named: every topic of the table
    assert check_request(CATALOG, _request(topics=(LOGIN,))) == (LOGIN,)
    with pytest.raises(ConfigError, match="'persistent://x/y/z' does not feed user_hourly"):
        check_request(CATALOG, _request(topics=("persistent://x/y/z",)))
    with pytest.raises(ConfigError, match="--reason 'typo' is not a quarantine reason"):
        check_request(CATALOG, _request(reasons=("typo",)))
    with pytest.raises(ConfigError, match="--to 2026-11-22T08 is before --from 2026-11-22T09"):
        check_request(CATALOG, _request(last_hour=H9 - dt.timedelta(hours=1)))
    with pytest.raises(ConfigError, match="fault 'later' is not one of"):
        check_request(CATALOG, _request(faults=("later",)))


def _login(ts: int, result: str, latency: object, country: str) -> bytes:
    body = {"uid": 7, "ts": ts, "method": "phone", "result": result, "app_version": "5.40.0"}
    return orjson.dumps({**body, "latency_ms": latency, "retry": 0, "geo": {"country": country}})


def test_stored_messages_are_reparsed_folded_and_sorted_into_outcomes() -> None:
    """An on-time valid login, a late valid one (folded at its event hour), one still invalid, one
    the stream cut at its payload limit."""
    late_ts = MS9 - 3 * 3_600_000 + 60_000  # 06:01, published at 09:xx: 3 h late
    rows = [
        ("m1", MS9 + 1_000, _login(MS9 + 500, "success", 120, "ID")),
        ("m2", MS9 + 2_000, _login(late_ts, "timeout", 80, "VN")),
        ("m3", MS9 + 3_000, _login(MS9 + 900, "success", 1.5, "PK")),  # a float in an int field
        ("m4", MS9 + 4_000, _login(MS9 + 950, "success", 100, "TH")),
    ]
    messages = pa.table(
        {
            "topic": [LOGIN] * 4,
            "message_id": [r[0] for r in rows],
            "publish_time": pa.array([r[1] * 1000 for r in rows], pa.timestamp("us", tz="UTC")),
            "payload": [r[2] if r[0] != "m4" else r[2][:40] for r in rows],
            "payload_bytes": pa.array([len(r[2]) for r in rows], pa.uint64()),
        }
    )
    folded = fold_messages(table_plan(CATALOG, "user_hourly"), "user_hourly", messages)
    assert sorted(r["message_id"] for r in folded.repaired) == ["m1", "m2"]
    invalid = {r["message_id"]: (r["reason"], r["detail"]) for r in folded.invalid}
    assert set(invalid) == {"m3", "m4"}
    assert invalid["m3"][0] == "wrong_type" and "latency_ms" in invalid["m3"][1]
    assert invalid["m4"] == ("truncated", f"the stream kept 40 of {len(rows[3][2])} bytes")
    partial = {(r["uid"], r["hour"]): r for r in folded.partials.to_pylist()}
    six = H9 - dt.timedelta(hours=3)
    assert set(partial) == {(7, H9), (7, six)}
    assert (partial[(7, H9)]["logins"], partial[(7, H9)]["login_failures"]) == (1, 0)
    assert (partial[(7, six)]["logins"], partial[(7, six)]["login_failures"]) == (0, 1)


def test_the_exit_code_is_that_of_the_first_period_not_republished(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert exit_code(RepairOutcome("user_hourly")) == 0
    for error, code in (
        (NotReadyError("behind"), 3),
        (ReconciliationError("differs"), 4),
        (PeriodBusyError("held"), 5),
    ):
        outcome = RepairOutcome("user_hourly", failed=[(H9, error)])
        assert exit_code(outcome) == code
        assert outcome.summary().count(str(error)) == 1  # the summary names it, once
    assert capsys.readouterr() == ("", "")  # the exit code alone prints nothing more


def test_the_airflow_task_passes_the_form_as_arguments() -> None:
    args = repair_args(
        "user_hourly",
        H9,
        H9 + dt.timedelta(hours=2),
        topics=[LOGIN],
        reasons=["wrong_type"],
        republish=False,
        airflow_run="widehouse_repair/manual__1",
    )
    assert args == [
        "repair",
        "--table",
        "user_hourly",
        "--from",
        "2026-11-22T09",
        "--to",
        "2026-11-22T11",
        "--topic",
        LOGIN,
        "--reason",
        "wrong_type",
        "--no-republish",
        "--airflow-run",
        "widehouse_repair/manual__1",
    ]

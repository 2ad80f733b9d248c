"""Hand-written health rows for the operations view's tests (integration and the Airflow e2e).

The warehouse as of :data:`NOW` (2026-11-20 10:30 UTC), app ``widehouse``: slot group ``g001``
reading topics :data:`A` and :data:`B`, an isolated group that never committed, and rows 30 days
old that every window must leave out. The tests work their expected numbers out by hand.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from typing import Any

import pyarrow as pa

from widehouse import clickhouse
from widehouse.contracts import tables as t
from widehouse.planner import Group, Plan, save_plan
from widehouse.settings import PlannerSettings, Settings

NOW = dt.datetime(2026, 11, 20, 10, 30, tzinfo=dt.UTC)
T0 = dt.datetime(2026, 11, 20, tzinfo=dt.UTC)
H = dt.timedelta(hours=1)
M = dt.timedelta(minutes=1)
OLD = T0 - dt.timedelta(days=30)
"""Months of history: outside every window."""
APP = "widehouse"
A = "persistent://bigolive/app/login"
B = "persistent://bigolive/app/click"
"""Two topics of the catalog, feeding both wide tables, read by slot group ``g001``."""
ISOLATED = "persistent://bigolive/app/settings_change"
"""A topic of ``user_daily`` only, alone in group ``iso-settings``, which never committed a batch."""
REFINALIZE_RUN = "widehouse_refinalize/manual__2026-11-20T09:00:00+00:00"
"""The Airflow run the ledger names for hour 06's re-finalize (the older rows name none)."""
RESTARTED_AT = [OLD, NOW - 25 * H, NOW - 3 * H, NOW - 1 * H, NOW + 1 * H]
"""When the supervisor restarted g001: two of them in the 24 h up to NOW (one is after NOW)."""


def _progress(
    batch: int, topic: str, at: dt.datetime, rows_in: int, lag: int, mark: dt.datetime
) -> dict[str, Any]:
    times = {"max_event_time": at, "min_publish_time": at, "max_publish_time": at, "batch_time": at}
    return {
        **{"app": APP, "group": "g001", "batch_id": batch, "topic": topic, "bad": 0, "late": 0},
        **{"rows_in": rows_in, "rows_out": rows_in, "lag": lag, "duration_ms": 5},
        **{**times, "committed_at": at, "watermark": mark},
    }


def ledger_row(period: dt.datetime, at: dt.datetime, run_id: str, rows: int, **flags: Any) -> dict[str, Any]:
    """A ledger row of ``user_hourly`` (published ``rows`` rows, reconciled, not forced) with ``flags``."""
    row = {"table": "user_hourly", "period": period, "finalized_at": at, "run_id": run_id, "kind": "hour"}
    more = {"forced": False, "include_late": False, "late_rows": 0, "reconciliation": "ok", "note": ""}
    more["airflow_run"] = ""
    return {**row, "rows": rows, **more, **flags}


def _check(hour: dt.datetime, at: dt.datetime, status: str) -> dict[str, Any]:
    row = {
        "table": "user_hourly",
        "hour": hour,
        "topic": A,
        "run_id": "x",
        "checked_at": at,
        "status": status,
    }
    return {**row, "broker": 1, "counted_in": 1, "valid": 1, "quarantined": 0, "late": 0, "detail": ""}


def _counts(batch: int, topic: str, hour: dt.datetime, rows_in: int, bad: int, late: int) -> dict[str, Any]:
    row = {"app": APP, "group": "g001", "batch_id": batch, "topic": topic, "publish_hour": hour}
    return {**row, "rows_in": rows_in, "rows_out": rows_in - bad - late, "bad": bad, "late": late}


def _bad(message_id: str, at: dt.datetime, reason: str, payload: bytes) -> dict[str, Any]:
    row = {"app": APP, "group": "g001", "batch_id": 10, "topic": A, "message_id": message_id}
    return {**row, "publish_time": at, "reason": reason, "detail": "d", "payload": payload,
            "payload_bytes": len(payload)}  # fmt: skip


def _repair(message_id: str, outcome: str, chunk: int, at: dt.datetime) -> dict[str, Any]:
    reason = "wrong_type" if outcome == "invalid" else ""
    return {
        "table": "user_hourly",
        "topic": A,
        "message_id": message_id,
        "publish_time": at - H,
        "outcome": outcome,
        "reason": reason,
        "detail": "",
        "chunk": chunk,
        "run_id": "rp",
        "at": at,
    }


ROWS: dict[Any, list[dict[str, Any]]] = {
    t.PROGRESS_SHAPE: [
        _progress(1, "*", OLD, 999_999, 0, OLD),
        _progress(10, "*", T0 + 9 * H + 10 * M, 3600, 0, T0 + 8 * H),
        _progress(11, "*", T0 + 10 * H + 29 * M, 1800, 0, T0 + 10 * H),
        _progress(10, A, T0 + 9 * H + 10 * M, 1000, 900, T0 + 8 * H),
        _progress(11, A, T0 + 10 * H + 29 * M, 1000, 40, T0 + 10 * H),
        _progress(11, B, T0 + 10 * H + 29 * M, 800, 7, T0 + 10 * H),
    ],
    t.LEDGER_SHAPE: [
        ledger_row(T0 + 5 * H, T0 + 7 * H, "r5", 42),
        ledger_row(T0 + 6 * H, T0 + 7 * H, "r6", 1, forced=True),
        ledger_row(
            T0 + 6 * H, T0 + 9 * H, "r6b", 2, include_late=True, late_rows=1, airflow_run=REFINALIZE_RUN
        ),
    ],
    t.RECONCILIATION_SHAPE: [
        _check(T0 + 7 * H, T0 + 9 * H, "mismatch"),
        _check(T0 + 4 * H, T0 + 8 * H, "mismatch"),
        _check(T0 + 4 * H, T0 + 9 * H, "ok"),  # a later check found it fixed
    ],
    t.COUNTS_SHAPE: [
        _counts(10, A, T0 + 9 * H, 1000, 30, 10),
        _counts(11, A, T0 + 10 * H, 1000, 10, 0),
        _counts(11, B, T0 + 10 * H, 800, 0, 0),
        _counts(1, A, OLD, 5, 5, 0),
    ],
    # m1 repaired (chunk 1 done); m2 invalid, then claimed by chunk 2 (not done); m3 invalid
    t.REPAIRS_SHAPE: [
        _repair("m1", "repaired", 1, T0 + 8 * H),
        _repair("m2", "invalid", 0, T0 + 8 * H),
        _repair("m2", "repaired", 2, T0 + 9 * H),
        _repair("m3", "invalid", 0, T0 + 9 * H + 5 * M),
        _repair("m0", "repaired", 1, OLD),  # outside the 14 days
    ],
    t.REPAIR_CHUNKS_SHAPE: [
        {
            "table": "user_hourly",
            "chunk": 1,
            "hour": T0 + 7 * H,
            "rows": 1,
            "run_id": "rp",
            "done_at": T0 + 8 * H,
        }
    ],
    t.QUARANTINE_SHAPE: [
        _bad("m1", T0 + 9 * H, "bad_json", b"{x"),
        _bad("m2", T0 + 9 * H + 30 * M, "bad_json", b"{y"),
        _bad("m3", T0 + 10 * H, "no_key", b"{}"),
        _bad("m0", OLD, "ancient", b""),
    ],
}


PLAN = Plan(
    groups=(
        Group("g001", (A, B), load=14_000_000.0, cores=1),  # fill 0.5 at 28e6 per core
        Group("iso-settings", (ISOLATED,), load=56_000_000.0, cores=2, isolated=True),  # fill 1.0
    ),
    partitions={A: 1, B: 1, ISOLATED: 4},
    settings=PlannerSettings(slot_capacity=28_000_000.0),  # what the view computes fill against
)


def seed(settings: Settings) -> None:
    """Create the tables in the settings' (private) database and insert :data:`ROWS`; write the
    supervisor's state (g001 started, one failure, restarted at :data:`RESTARTED_AT`) and :data:`PLAN`
    into the settings' state dir."""
    client = clickhouse.connect(settings.clickhouse)
    try:
        client.ensure_shapes((*t.STREAM_SHAPES, *t.BATCH_SHAPES))
        for shape, rows in ROWS.items():
            client.insert(
                shape.name, pa.Table.from_pylist(rows, schema=shape.arrow_schema()), uuid.uuid4().hex
            )
    finally:
        client.close()
    (settings.state_dir / "supervisor").mkdir(parents=True, exist_ok=True)
    (settings.state_dir / "supervisor" / "state.json").write_text(
        json.dumps(
            {
                "groups": {
                    "g001": {
                        "topics": [A, B],
                        "started_at": 1.0,
                        "failures": 1,
                        "restarted_at": [at.timestamp() for at in RESTARTED_AT],
                    }
                }
            }
        )
    )
    save_plan(PLAN, settings.state_dir / "plan.json")


def drop(settings: Settings) -> None:
    client = clickhouse.connect(settings.clickhouse)
    try:
        client.command(f"DROP DATABASE IF EXISTS {client.database}")
    finally:
        client.close()

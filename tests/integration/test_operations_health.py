"""The health queries against the real ClickHouse service: a private database, hand-written
progress, counts, ledger, reconciliation and quarantine rows (:mod:`tests.integration.operations_support`),
hand-computed expectations."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Iterator

import pytest

from tests.conftest import settings_for
from tests.integration.operations_support import ISOLATED, NOW, REFINALIZE_RUN, T0, A, B, H, M, drop, seed
from widehouse.operations import health as h
from widehouse.operations.overview import as_json, overview
from widehouse.operations.page import render
from widehouse.settings import Settings

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def seeded(services: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    state = tmp_path_factory.mktemp("ops-state")
    settings = settings_for(state, WIDEHOUSE_CLICKHOUSE_DATABASE=f"it_ops_{uuid.uuid4().hex[:8]}")
    seed(settings)
    yield settings
    drop(settings)


def test_groups_from_progress_and_supervisor(seeded: Settings) -> None:
    view = overview(seeded, now=NOW)
    g, iso = view.groups
    assert (iso.name, iso.state, iso.alive, iso.last_commit) == ("iso-settings", "not started", False, None)
    assert (g.name, g.state, g.last_batch) == ("g001", "alive", 11)
    # restarted 30 days, 25 h, 3 h, 1 h before NOW and 1 h after it: two in the 24 h up to NOW
    assert (g.restarts, g.failures) == (2, 1)
    assert g.last_commit == T0 + 10 * H + dt.timedelta(minutes=29)
    assert g.watermark == T0 + 10 * H
    assert g.lag == ((A, 40), (B, 7))  # the newest batch's lag, not the older 900
    # 09:00: 3,600 rows / 3,600 s; 10:00: 1,800 rows over the 30 minutes gone by
    assert [(p.hour, p.events_per_s) for p in g.points] == [(T0 + 9 * H, 1.0), (T0 + 10 * H, 1.0)]
    # freshness: 09:10 commit of an 08:00 watermark = 4,200 s; 10:29 of 10:00 = 1,740 s
    assert [p.freshness_s for p in g.points] == [4200.0, 1740.0]


def test_strips_from_ledger_reconciliation_and_watermark(seeded: Settings) -> None:
    view = overview(seeded, now=NOW)
    strips = {s.table: s for s in view.strips}
    hourly = {c.period: c for c in strips["user_hourly"].hours}
    assert len(hourly) == 48 and min(hourly) == T0 + 10 * H - 47 * H
    assert hourly[T0 + 5 * H].state == h.FINAL and hourly[T0 + 5 * H].rows == 42
    assert hourly[T0 + 6 * H].state == h.REFINALIZED and hourly[T0 + 6 * H].run_id == "r6b"
    assert hourly[T0 + 6 * H].publishes == 2
    assert hourly[T0 + 6 * H].airflow_run == REFINALIZE_RUN  # the newest publish's run
    assert hourly[T0 + 5 * H].airflow_run == ""  # a row that names no Airflow run
    assert hourly[T0 + 7 * H].state == h.MISMATCH
    # watermark 10:00, lateness 1 h (the catalog's): hour 08 needs 10:00 (due), 09 needs 11:00
    assert hourly[T0 + 4 * H].state == h.DUE  # its mismatch was fixed by a later check
    assert hourly[T0 + 8 * H].state == h.DUE
    assert hourly[T0 + 9 * H].state == h.WAITING
    assert hourly[T0 + 10 * H].state == h.LIVE
    days = strips["user_hourly"].days
    assert len(days) == 14 and days[-1].period == T0 and days[-1].final_hours == 2
    daily = strips["user_daily"]
    assert daily.hours == () and daily.days[-1].state == h.LIVE
    # fed by g001 and iso-settings too, which never committed: every past day waits for it
    assert {c.state for c in daily.days[:-1]} == {h.WAITING}
    assert view.problems == ()


def test_plan_groups_load_fill_and_isolated_topics(seeded: Settings) -> None:
    plan = overview(seeded, now=NOW).plan
    assert plan is not None
    assert (plan.topics, plan.cores, plan.isolated_topics) == (3, 3, (ISOLATED,))
    got = {g.name: (g.topics, g.load, g.cores, g.fill, g.isolated) for g in plan.groups}
    assert got == {"g001": (2, 14e6, 1, 0.5, False), "iso-settings": (1, 56e6, 2, 1.0, True)}


def test_a_secret_in_the_supervisor_log_tail_is_redacted(seeded: Settings) -> None:
    password = seeded.local.clickhouse_password
    assert password
    path = seeded.state_dir / "supervisor" / "state.json"
    saved = path.read_text()
    body = json.loads(saved)
    body["groups"]["g001"]["last_failure"] = f"connect http://widehouse:{password}@127.0.0.1:8123 refused"
    path.write_text(json.dumps(body))
    try:
        view = overview(seeded, now=NOW)
    finally:
        path.write_text(saved)
    assert view.groups[0].last_failure == "connect http://widehouse:***@127.0.0.1:8123 refused"
    assert password not in render(view)


def test_rejections_and_page(seeded: Settings) -> None:
    view = overview(seeded, now=NOW)
    (a,) = view.rejections.topics  # B had nothing bad or late; the 30-day-old rows are outside
    assert (a.topic, a.rows_in, a.bad, a.late) == (A, 2000, 40, 10)
    assert a.reasons == (("bad_json", 2), ("no_key", 1))
    assert a.sample["reason"] == "no_key" and a.sample["payload"] == "{}"
    assert view.rejections.reasons == (("bad_json", 2), ("no_key", 1))
    body = json.dumps(as_json(view))
    html = render(view)
    assert "g001" in html and "user_hourly" in html and "bad_json" in html
    # hour 06 straight to its re-finalize's run page; hour 05 (no run in its row) through the view
    assert "<a href='../dags/widehouse_refinalize/runs/manual__2026-11-20T09%3A00%3A00%2B00%3A00'>" in html
    assert "<a href='run?dag=widehouse_hourly&amp;period=2026-11-20T05%3A00%3A00%2B00%3A00'>" in html
    password = seeded.local.clickhouse_password
    assert password and password not in html and password not in body


def test_repairs_per_table(seeded: Settings) -> None:
    from widehouse.operations.repairs import TableRepairs

    view = overview(seeded, now=NOW)
    # m1 repaired; m2's newest outcome is a claim of chunk 2, which is not done (1 chunk to finish);
    # m3 still quarantined; m0 is 30 days old
    assert view.repairs == (TableRepairs("user_hourly", 1, 1, 1, T0 + 9 * H + 5 * M),)
    assert "<td>user_hourly</td><td>1</td><td>1</td><td>1</td>" in render(view)

"""Shaping the health queries' rows (hand-written rows, hand-computed expectations)."""

from __future__ import annotations

import datetime as dt

from widehouse.operations import health as h
from widehouse.operations.health import Window, shape_groups, shape_rejections, shape_strips
from widehouse.orchestration.supervisor import GroupState, SupervisorState

NOW = dt.datetime(2026, 11, 20, 10, 30, tzinfo=dt.UTC)
H = dt.timedelta(hours=1)
T0 = dt.datetime(2026, 11, 20, tzinfo=dt.UTC)


def test_groups_alive_stale_given_up_and_rates() -> None:
    summary = [
        ("g001", NOW - dt.timedelta(seconds=30), 41, T0 + 9 * H),
        ("g002", NOW - dt.timedelta(hours=2), 7, T0 + 7 * H),
    ]
    hourly = [("g001", T0 + 9 * H, 7200, 90_000), ("g001", T0 + 10 * H, 900, 30_000)]
    lag = [("g001", "a", 50), ("g001", "b", 3)]
    day = 86_400.0
    at_now = NOW.timestamp()
    # restarted 25 h ago (outside the 24 h), 23 h ago, 1 s ago, and 10 s after NOW (an ?at= in the past)
    restarted_at = [at_now - 25 * 3600, at_now - 23 * 3600, at_now - 1, at_now + 10]
    sup = SupervisorState(
        groups={
            "g001": GroupState(topics=["a", "b"], started_at=1.0, failures=2, restarted_at=restarted_at),
            "g003": GroupState(topics=["c"], given_up=True, failures=5, last_failure="boom"),
        }
    )
    got = {g.name: g for g in shape_groups(summary, hourly, lag, NOW, sup, 300, planned=["g001", "g004"])}
    assert got["g001"].state == "alive" and got["g001"].alive
    assert (got["g001"].restarts, got["g001"].failures) == (2, 2)  # the two within (NOW - 24 h, NOW]
    assert got["g003"].restarts == 0 and got["g003"].failures == 5  # no restart recorded
    week = shape_groups(summary, hourly, lag, NOW, sup, 300, restart_hours=int(7 * day / 3600))
    assert {g.name: g.restarts for g in week}["g001"] == 3
    assert got["g002"].state == "stale" and not got["g002"].alive  # no supervisor entry, 2 h old
    assert got["g003"].state == "given-up" and got["g003"].last_commit is None
    assert got["g003"].last_failure == "boom"
    assert got["g004"].state == "not started" and not got["g004"].alive  # planned, never seen
    # 7,200 rows in a full hour = 2/s; 900 rows in the 30 minutes of the current hour = 0.5/s
    assert [p.events_per_s for p in got["g001"].points] == [2.0, 0.5]
    assert [p.freshness_s for p in got["g001"].points] == [90.0, 30.0]
    assert got["g001"].lag == (("a", 50), ("b", 3))


def test_strip_states_of_an_hourly_table() -> None:
    spec = h.TableSpec("t", "hour", ("g001",))
    ledger = [
        ("t", T0 + 5 * H, 1, "r5", False, False, "ok", 10, T0 + 7 * H, ""),
        ("t", T0 + 6 * H, 1, "r6", True, False, "ok", 11, T0 + 7 * H, "widehouse_hourly/scheduled__x"),
        ("t", T0 + 4 * H, 2, "r4b", False, True, "ok", 12, T0 + 8 * H, "widehouse_refinalize/manual__y"),
        ("t", T0 + 3 * H, 1, "r3", False, False, "accepted", 13, T0 + 8 * H, ""),
    ]
    mismatches = [("t", T0 + 2 * H)]
    lateness = dt.timedelta(minutes=30)
    # watermark 08:45: hour 07 needs 08:30 (due), hour 08 needs 09:30 (waiting), hour 10 is live
    marks = {"g001": T0 + 8 * H + dt.timedelta(minutes=45)}
    (strip,) = shape_strips([spec], ledger, mismatches, marks, NOW, lateness, Window(hours=10, days=2))
    states = {c.period.hour: c.state for c in strip.hours}
    assert [c.period for c in strip.hours] == [T0 + i * H for i in range(1, 11)]
    assert states == {
        1: h.DUE,  # no ledger row, the watermark passed it long ago
        2: h.MISMATCH,
        3: h.ACCEPTED,
        4: h.REFINALIZED,
        5: h.FINAL,
        6: h.FORCED,
        7: h.DUE,
        8: h.WAITING,
        9: h.WAITING,
        10: h.LIVE,
    }
    assert strip.hours[4].run_id == "r5" and strip.hours[4].rows == 10
    assert [c.airflow_run for c in strip.hours[2:6]] == [
        "",
        "widehouse_refinalize/manual__y",
        "",
        "widehouse_hourly/scheduled__x",
    ]
    yesterday, today = strip.days
    assert today.period == T0 and today.state == h.MISMATCH and today.final_hours == 4
    assert today.rows == 10 + 11 + 12 + 13
    assert yesterday.state == h.DUE and yesterday.final_hours == 0


def test_daily_table_and_a_group_that_never_committed_waits() -> None:
    spec = h.TableSpec("d", "day", ("g001", "g009"))
    ledger = [("d", T0 - 2 * dt.timedelta(days=1), 1, "x", False, False, "ok", 5, T0, "")]
    marks = {"g001": NOW, "g009": None}
    (strip,) = shape_strips([spec], ledger, [], marks, NOW, dt.timedelta(0), Window(days=3))
    assert strip.hours == ()
    assert [c.state for c in strip.days] == [h.FINAL, h.WAITING, h.LIVE]


def test_rejections_rates_reasons_and_sample() -> None:
    counts = [("a", T0, 100, 5, 1), ("a", T0 + H, 100, 15, 0), ("b", T0, 10, 0, 2)]
    reasons = [("a", "bad_json", 12), ("a", "missing_key", 8)]
    overall = [("bad_json", 12), ("missing_key", 8)]
    samples = [("a", "bad_json", "Expecting value", b"{oops", 5), ("b", "x", "", "y" * 256, 1000)]
    rej = shape_rejections(counts, reasons, overall, samples)
    a, b = rej.topics
    assert (a.topic, a.rows_in, a.bad, a.late) == ("a", 200, 20, 1)
    assert a.bad_rate == 0.1 and a.late_rate == 0.005
    assert a.reasons == (("bad_json", 12), ("missing_key", 8))
    assert a.sample == {"reason": "bad_json", "detail": "Expecting value", "payload": "{oops"}
    assert b.sample["payload"].endswith(" …")  # cut: 1,000 bytes, 256 shown
    assert rej.reasons == (("bad_json", 12), ("missing_key", 8))


def test_page_escapes_names_and_payloads() -> None:
    from widehouse.operations.health import PlanView, Rejections, TopicRates
    from widehouse.operations.overview import Overview
    from widehouse.operations.page import render, spark_line

    nasty = "<script>alert(1)</script>"
    rates = TopicRates(nasty, 10, 1, 0, (), (("r", 1),), {"reason": "r", "detail": nasty, "payload": nasty})
    view = Overview(NOW, "app", (), (), Rejections((rates,), ((nasty, 1),)), PlanView((), (), 0, 0))
    html = render(view)
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    # a line of 0, 5, 10 over 100 px: x = 0, 50, 100; y from 22 (zero) up to 2 (the maximum)
    assert "points='0.0,22.0 50.0,12.0 100.0,2.0'" in spark_line([0, 5, 10], width=100, height=24)
    assert spark_line([]) == "-"


def test_a_cell_links_to_the_airflow_run_its_ledger_row_names_else_the_fallback() -> None:
    from widehouse.operations.page import airflow_run_link, cell_link

    hour = T0 + 6 * H
    # a re-finalize's ledger row: straight to that run's page in Airflow 3's UI (dags/<id>/runs/<id>),
    # relative to the view's root /widehouse/; the run id's ':' and '+' quoted
    refinalized = h.Cell(
        hour, h.REFINALIZED, 2, "r6b", airflow_run="widehouse_refinalize/manual__2026-11-20T09:00:00+00:00"
    )
    assert cell_link("widehouse_hourly", refinalized) == (
        "../dags/widehouse_refinalize/runs/manual__2026-11-20T09%3A00%3A00%2B00%3A00"
    )
    # an older row (no airflow_run) and an unpublished period: the view's run endpoint by logical date
    fallback = "run?dag=widehouse_hourly&period=2026-11-20T06%3A00%3A00%2B00%3A00"
    assert cell_link("widehouse_hourly", h.Cell(hour, h.FINAL, 1, "r6")) == fallback
    assert cell_link("widehouse_hourly", h.Cell(hour, h.DUE)) == fallback
    # a value the tasks never write (no dag id / run id pair, a blank in it): the fallback too
    assert cell_link("widehouse_hourly", h.Cell(hour, h.FINAL, 1, "r6", airflow_run="by hand")) == fallback
    assert airflow_run_link("nodagid") is None
    # a run id with '/' and '#' (allowed by a deployment's run id pattern) stays one path segment
    assert airflow_run_link("widehouse_daily/a/b#c") == "../dags/widehouse_daily/runs/a%2Fb%23c"


def test_the_page_links_each_cell_as_its_ledger_row_says() -> None:
    from widehouse.operations.health import PlanView, Rejections, Strip
    from widehouse.operations.overview import Overview
    from widehouse.operations.page import render

    cells = (
        h.Cell(T0 + 5 * H, h.FINAL, 1, "r5", rows=3),
        h.Cell(T0 + 6 * H, h.REFINALIZED, 2, "r6b", rows=4, airflow_run="widehouse_refinalize/manual__'x<"),
    )
    strip = Strip("t", "hour", cells, ())
    html = render(Overview(NOW, "app", (), (strip,), Rejections((), ()), PlanView((), (), 0, 0)))
    assert "<a href='run?dag=widehouse_hourly&amp;period=2026-11-20T05%3A00%3A00%2B00%3A00'>" in html
    assert "<a href='../dags/widehouse_refinalize/runs/manual__%27x%3C'>" in html
    assert "Airflow run widehouse_refinalize/manual__&#x27;x&lt;" in html  # the title, escaped

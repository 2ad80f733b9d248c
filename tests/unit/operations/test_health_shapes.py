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
    sup = SupervisorState(
        groups={
            "g001": GroupState(topics=["a", "b"], started_at=1.0, failures=2),
            "g003": GroupState(topics=["c"], given_up=True, failures=5, last_failure="boom"),
        }
    )
    got = {g.name: g for g in shape_groups(summary, hourly, lag, NOW, sup, 300, planned=["g001", "g004"])}
    assert got["g001"].state == "alive" and got["g001"].alive and got["g001"].restarts == 2
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
        ("t", T0 + 5 * H, 1, "r5", False, False, "ok", 10, T0 + 7 * H),
        ("t", T0 + 6 * H, 1, "r6", True, False, "ok", 11, T0 + 7 * H),
        ("t", T0 + 4 * H, 2, "r4b", False, True, "ok", 12, T0 + 8 * H),
        ("t", T0 + 3 * H, 1, "r3", False, False, "accepted", 13, T0 + 8 * H),
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
    yesterday, today = strip.days
    assert today.period == T0 and today.state == h.MISMATCH and today.final_hours == 4
    assert today.rows == 10 + 11 + 12 + 13
    assert yesterday.state == h.DUE and yesterday.final_hours == 0


def test_daily_table_and_a_group_that_never_committed_waits() -> None:
    spec = h.TableSpec("d", "day", ("g001", "g009"))
    ledger = [("d", T0 - 2 * dt.timedelta(days=1), 1, "x", False, False, "ok", 5, T0)]
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

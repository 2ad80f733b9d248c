"""The event trigger's decision, from hand-made watermark events (no Pulsar, no Airflow)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from widehouse.catalog import Catalog, load_catalog
from widehouse.orchestration.watermark_watch import HourWatch, first_unfinalized, hours_in_events
from widehouse.paths import default_schemas_dir
from widehouse.stream.control import WatermarkEvent

UTC = dt.UTC
LOGIN = "persistent://bigolive/app/login"  # feeds user_hourly
H9 = dt.datetime(2026, 11, 22, 9, tzinfo=UTC)


def ms(hour: int, minute: int = 0, millis: int = 0) -> int:
    return int(dt.datetime(2026, 11, 22, hour, minute, tzinfo=UTC).timestamp() * 1000) + millis


def mark(group: str, at_ms: int, topics: tuple[str, ...] = (LOGIN,), app: str = "wh") -> WatermarkEvent:
    return WatermarkEvent(app, group, 1, at_ms, topics)


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog(default_schemas_dir())


def watch(catalog: Catalog, **kwargs: Any) -> HourWatch:
    return HourWatch(catalog, "user_hourly", "wh", H9, **kwargs)


def test_fires_only_once_every_feeding_group_passed_hour_end_plus_lateness(catalog: Catalog) -> None:
    w = watch(catalog)
    plan = ["g001", "g002"]
    assert w.ready_hours(plan) == []  # nothing heard
    w.observe(mark("g001", ms(11)))
    assert w.ready_hours(plan) == []  # g002 silent
    w.observe(mark("g002", ms(10, 59) + 59_999))  # 1 ms short of 09:00 + 1 h + lateness 1 h
    assert w.ready_hours(plan) == []
    assert w.gate(H9, plan).lagging == {"g002": dt.datetime(2026, 11, 22, 10, 59, 59, 999000, tzinfo=UTC)}
    w.observe(mark("g002", ms(11)))
    assert w.ready_hours(plan) == [H9]
    w.advance([H9])
    assert w.next_hour == dt.datetime(2026, 11, 22, 10, tzinfo=UTC)
    assert w.ready_hours(plan) == []  # 10:00 needs 12:00


def test_several_hours_in_order_up_to_the_cap(catalog: Catalog) -> None:
    w = watch(catalog, max_hours=2)
    w.observe(mark("g001", ms(14, 30)))
    assert w.ready_hours(["g001"]) == [H9, H9 + dt.timedelta(hours=1)]
    w.advance(w.ready_hours(["g001"]))
    assert w.ready_hours(["g001"]) == [H9 + dt.timedelta(hours=2), H9 + dt.timedelta(hours=3)]
    w.advance(w.ready_hours(["g001"]))
    assert w.ready_hours(["g001"]) == []  # 13:00 needs 15:00; g001 is at 14:30


def test_replays_other_apps_and_unrelated_groups_change_nothing(catalog: Catalog) -> None:
    w = watch(catalog)
    w.observe(mark("g001", ms(11)))
    w.observe(mark("g001", ms(8)))  # an older event read later: the highest stays
    w.observe(mark("g002", ms(5), app="other"))
    w.observe(mark("g003", ms(6), topics=("persistent://bigolive/app/not_a_user_hourly_topic",)))
    assert w.marks == {"g001": ms(11), "g003": ms(6)}
    # no plan: the feeding groups are those whose events name one of the table's topics
    assert w.feeding(None) == ["g001"]
    assert w.ready_hours(None) == [H9]
    # with a plan, a group that never published holds the hour back
    assert w.ready_hours(["g001", "g004"]) == []


def test_payload_names_hours_and_watermarks(catalog: Catalog) -> None:
    w = watch(catalog)
    w.observe(mark("g001", ms(11, 5)))
    assert w.payload([H9], ["g001"]) == {
        "table": "user_hourly",
        "app": "wh",
        "hours": ["2026-11-22T09:00:00+00:00"],
        "needed": "2026-11-22T11:00:00+00:00",
        "watermarks": {"g001": "2026-11-22T11:05:00+00:00"},
    }


def test_first_unfinalized_hour() -> None:
    now = dt.datetime(2026, 11, 22, 12, 40, tzinfo=UTC)
    hours = [H9 + dt.timedelta(hours=i) for i in range(4)]  # 09..12
    assert first_unfinalized(H9, [], now) == H9
    assert first_unfinalized(H9, hours[:2], now) == hours[2]
    assert first_unfinalized(H9, [hours[0], hours[2]], now) == hours[1]
    assert first_unfinalized(H9, hours, now) == dt.datetime(2026, 11, 22, 13, tzinfo=UTC)


def test_hours_in_triggering_events() -> None:
    extras = [
        {"from_trigger": True, "payload": {"table": "user_hourly", "hours": ["2026-11-22T10:00:00+00:00"]}},
        {"from_trigger": True, "payload": {"table": "user_hourly", "hours": ["2026-11-22T09:00:00Z"]}},
        {"from_trigger": True, "payload": {"table": "user_daily", "hours": ["2026-11-22T11:00:00+00:00"]}},
        None,
        {"from_trigger": True, "payload": {"table": "user_hourly", "hours": ["2026-11-22T10:00:00+00:00"]}},
    ]
    assert hours_in_events("user_hourly", extras) == [H9, H9 + dt.timedelta(hours=1)]

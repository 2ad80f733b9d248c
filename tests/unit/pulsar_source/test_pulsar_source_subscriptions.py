"""Subscription names, where commits move cursors, and which subscriptions cleanup removes."""

from __future__ import annotations

import pytest

from widehouse.contracts.identity import app_of, subscription_name
from widehouse.errors import ConfigError
from widehouse.pulsar.positions import Mark, Position
from widehouse.source.cleanup import AppSubscription, judge
from widehouse.source.subscriptions import (
    PROP_APP,
    PROP_HEARTBEAT,
    ack_target,
    cursor_target,
    heartbeat_properties,
)


def test_names_round_trip_and_reject_bad_ids() -> None:
    assert subscription_name("group-7") == "widehouse-group-7"
    assert app_of("widehouse-group-7") == "group-7"
    assert app_of("other-sub") is None
    assert app_of("x-group", prefix="x-") == "group"
    with pytest.raises(ConfigError, match="appId"):
        subscription_name("has space")


def test_heartbeat_properties() -> None:
    props = heartbeat_properties("g1", now_ms=1234)
    assert props[PROP_APP] == "g1" and props[PROP_HEARTBEAT] == "1234"


def test_cursors_never_lead_what_was_consumed() -> None:
    assert cursor_target(Mark(None, -1)) is None
    assert cursor_target(Mark(Position(4, 9), 10)) == (Position(4, 9), True)  # through entry 9
    assert cursor_target(Mark(Position(4, 9, 2), 10)) == (Position(4, 9), False)  # entry 9 still open
    assert ack_target(Mark(Position(4, 9), 10)) == Position(4, 9)
    assert ack_target(Mark(Position(4, 9, 2), 10)) == Position(4, 8)
    assert ack_target(Mark(Position(4, 0, 2), 10)) is None
    assert ack_target(Mark(None, 3)) is None


NOW = 10_000_000


def sub(app: str, consumers: int = 0, beat_s_ago: float | None = 10.0) -> AppSubscription:
    beat = None if beat_s_ago is None else int(NOW - beat_s_ago * 1000)
    return AppSubscription("persistent://t/ns/a", f"widehouse-{app}", app, consumers, 5, beat)


def test_cleanup_rules() -> None:
    assert not judge(sub("live", consumers=1, beat_s_ago=99_999), NOW, ttl_s=3600).remove
    assert not judge(sub("resting", beat_s_ago=600), NOW, ttl_s=3600).remove
    dead = judge(sub("dead", beat_s_ago=7200), NOW, ttl_s=3600)
    assert dead.remove and "no heartbeat for 2.0h" in dead.reason
    assert judge(sub("anon", beat_s_ago=None), NOW, ttl_s=3600).remove
    retired = judge(sub("live", consumers=1), NOW, ttl_s=3600, retire=["live"])
    assert retired.remove and retired.reason == "app retired"

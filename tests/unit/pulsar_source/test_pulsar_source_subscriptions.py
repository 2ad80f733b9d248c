"""Subscription names, where commits move cursors, which subscriptions cleanup removes, and a busy
subscription left for the next trigger."""

from __future__ import annotations

from typing import Any, cast

import pytest

from widehouse.contracts.identity import app_of, subscription_name
from widehouse.errors import ConfigError
from widehouse.pulsar.admin import CursorResetRefusedError, SubscriptionBusyError
from widehouse.pulsar.positions import Mark, Position, TopicPartition
from widehouse.settings import PulsarSettings
from widehouse.source.cleanup import AppSubscription, judge
from widehouse.source.subscriptions import (
    PROP_APP,
    PROP_HEARTBEAT,
    SubscriptionKeeper,
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


class _BusyOnce:
    """An admin whose subscriptions all exist; the first reset of ``busy`` raises ``error``."""

    def __init__(self, busy: str, error: Exception) -> None:
        self.busy = busy
        self.error = error
        self.resets: list[str] = []

    def pipelined(self, *_args: object) -> None:
        return None  # nothing at once: each call as below

    def create_subscription(self, *_args: object) -> bool:
        return False

    def reset_cursor_to_time(self, topic: str, _sub: str, _ms: int) -> None:
        if topic == self.busy and self.busy not in self.resets:
            self.resets.append(topic)
            raise self.error
        self.resets.append(topic)

    def reset_cursor(self, topic: str, *_args: object, **_kw: object) -> None:
        self.reset_cursor_to_time(topic, "", 0)

    def update_subscription_properties(self, *_args: object) -> None:
        pass


class _View:
    concurrency = 1

    def __init__(self, admin: _BusyOnce) -> None:
        self._admin = admin

    def admin(self) -> _BusyOnce:
        return self._admin

    def map(self, fn: Any, items: list[Any]) -> list[Any]:
        return [fn(i) for i in items]


@pytest.mark.parametrize(
    "error",
    [
        SubscriptionBusyError("stayed busy"),
        # what a SIGKILLed standalone broker answered for ~2 minutes after its restart
        CursorResetRefusedError(
            "answered 412: Unable to find position for position specified: "
            "unable to persist readPosition for cursor reset 8:0"
        ),
    ],
)
def test_a_busy_or_refused_reset_is_left_for_the_next_trigger_not_fatal(
    monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    a, b = TopicPartition("persistent://t/ns/x", 0), TopicPartition("persistent://t/ns/x", 1)
    admin = _BusyOnce(b.name, error)
    keeper = SubscriptionKeeper(
        PulsarSettings("pulsar://127.0.0.1:1", "http://127.0.0.1:1"),
        "app",
        cast(Any, _View(admin)),
        heartbeat_interval_s=0,
    )
    monkeypatch.setattr(keeper, "_subscribe", lambda parts: {tp: object() for tp in parts})
    keeper.attach({a: Mark(None, -1), b: Mark(None, -1)})
    assert keeper.attached == {a}
    keeper.attach({b: Mark(Position(3, 4), 9)})  # what the controller asks on the next trigger
    assert keeper.attached == {a, b}
    assert admin.resets == [a.name, b.name, b.name]

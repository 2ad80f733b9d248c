"""Subscription names, where commits move cursors, which subscriptions cleanup removes, and a busy
subscription left for the next trigger."""

from __future__ import annotations

import logging
import threading
from typing import Any, cast

import pytest

from widehouse.contracts.identity import app_of, subscription_name
from widehouse.errors import ConfigError, PulsarError
from widehouse.pulsar.admin import CursorResetRefusedError, SubscriptionBusyError
from widehouse.pulsar.bulk import Answer, Request
from widehouse.pulsar.positions import Mark, Position, TopicPartition
from widehouse.settings import PulsarSettings
from widehouse.source.cleanup import AppSubscription, judge
from widehouse.source.subscriptions import (
    PROP_APP,
    PROP_HEARTBEAT,
    RetryLog,
    SubscriptionKeeper,
    _tenfold,
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


def _keeper(admin: _BusyOnce, monkeypatch: pytest.MonkeyPatch) -> SubscriptionKeeper:
    """A keeper over ``admin`` whose consumers all attach (no broker)."""
    keeper = SubscriptionKeeper(
        PulsarSettings("pulsar://127.0.0.1:1", "http://127.0.0.1:1"),
        "app",
        cast(Any, _View(admin)),
        heartbeat_interval_s=0,
    )
    monkeypatch.setattr(keeper, "_subscribe", lambda parts: {tp: object() for tp in parts})
    return keeper


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
    keeper = _keeper(admin, monkeypatch)
    keeper.attach({a: Mark(None, -1), b: Mark(None, -1)})
    assert keeper.attached == {a}
    keeper.attach({b: Mark(Position(3, 4), 9)})  # what the controller asks on the next trigger
    assert keeper.attached == {a, b}
    assert admin.resets == [a.name, b.name, b.name]


class _Refusing(_BusyOnce):
    """An admin whose resets of ``topics`` are refused for the first ``times`` tries of each."""

    def __init__(self, topics: set[str], times: int) -> None:
        super().__init__("", CursorResetRefusedError("unable to persist readPosition for cursor reset"))
        self.left = dict.fromkeys(topics, times)

    def reset_cursor_to_time(self, topic: str, _sub: str, _ms: int) -> None:
        self.resets.append(topic)
        if self.left.get(topic, 0) > 0:
            self.left[topic] -= 1
            raise self.error


def test_a_lasting_refusal_is_logged_when_it_starts_at_tenfold_tries_and_when_it_passes(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    parts = [TopicPartition("persistent://t/ns/x", p) for p in range(4)]
    refused = parts[1:]  # three partitions, refused for 12 triggers
    admin = _Refusing({tp.name for tp in refused}, times=12)
    keeper = _keeper(admin, monkeypatch)
    caplog.set_level(logging.DEBUG, logger="widehouse.source.subscriptions")
    for _trigger in range(13):
        keeper.attach({tp: Mark(None, -1) for tp in parts})
    assert keeper.attached == set(parts)
    assert admin.resets.count(refused[0].name) == 13  # one try per trigger
    records = [r for r in caplog.records if r.name == "widehouse.source.subscriptions"]
    failures = [r for r in records if "failed on" in r.getMessage()]
    assert len(failures) == 12  # one line per trigger, not one per partition
    warned = [r.getMessage() for r in failures if r.levelno == logging.WARNING]
    assert len(warned) == 2  # tries 1 and 10
    assert "failed on 3 partition(s)" in warned[0] and "(try 1)" in warned[0]
    assert "(try 10)" in warned[1] and "unable to persist readPosition" in warned[1]
    assert all(
        r.levelno == logging.DEBUG
        for r in failures
        if "(try 1)" not in r.getMessage() and "(try 10)" not in r.getMessage()
    )
    passed = [r.getMessage() for r in records if r.levelno == logging.INFO and "passed" in r.getMessage()]
    assert passed == [
        "setting up subscription widehouse-app passed on 3 partition(s) after up to 12 failed tries"
    ]
    assert keeper._unset.tries == {}


def test_the_retry_log_forgets_partitions_no_longer_read(caplog: pytest.LogCaptureFixture) -> None:
    a, b = TopicPartition("persistent://t/ns/x", 0), TopicPartition("persistent://t/ns/x", 1)
    retries = RetryLog("attaching a consumer of s")
    caplog.set_level(logging.DEBUG, logger="widehouse.source.subscriptions")
    for _ in range(9):
        retries.report({a: "Timeout", b: "Timeout"}, [])
    retries.forget([a])
    retries.report({b: "Timeout"}, [])
    assert retries.tries == {b: 10}
    last = caplog.records[-1]
    assert last.levelno == logging.WARNING and last.getMessage() == (
        "attaching a consumer of s failed on 1 partition(s), retried next trigger: "
        "persistent://t/ns/x-partition-1 (try 10): Timeout"
    )
    retries.report({a: "Timeout"}, [b])  # a starts again from its first try
    assert retries.tries == {a: 1}
    assert caplog.records[-1].levelno == logging.WARNING and "(try 1)" in caplog.records[-1].getMessage()
    assert "after up to 10 failed tries" in caplog.records[-2].getMessage()


@pytest.mark.parametrize(
    ("tries", "logged"),
    [
        (1, True),
        (2, False),
        (9, False),
        (10, True),
        (11, False),
        (20, False),
        (100, True),
        (110, False),
        (1000, True),
    ],
)
def test_lasting_failures_are_logged_again_at_tenfold_tries(tries: int, logged: bool) -> None:
    assert _tenfold(tries) is logged


def test_a_partition_detached_while_refused_is_no_longer_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = TopicPartition("persistent://t/ns/x", 0), TopicPartition("persistent://t/ns/x", 1)
    keeper = _keeper(_Refusing({a.name, b.name}, times=5), monkeypatch)
    keeper.attach({a: Mark(None, -1), b: Mark(None, -1)})
    assert keeper._unset.tries == {a: 1, b: 1}
    keeper.detach([a])  # the topic went away, or the plan moved it to another group
    assert keeper._unset.tries == {b: 1}


class _Pipelining(_BusyOnce):
    """An admin that sends pipelined calls: every subscription exists (409), a pipelined reset of
    ``busy`` answers 412 (the client's own reset of it passes); it keeps each round's calls."""

    def __init__(self, busy: str) -> None:
        super().__init__("", SubscriptionBusyError("busy"))
        self.piped_busy = f"{busy}/subscription/"
        self.rounds: list[list[str]] = []

    def pipelined(self, calls: list[Request], _connections: int) -> list[Answer]:
        self.rounds.append([f"{c.method} {c.path}" for c in calls])

        def status(call: Request) -> int:
            if call.method == "PUT" and not call.path.endswith("/properties"):
                return 409  # a create: an earlier run's subscription
            busy = "resetcursor" in call.path and self.piped_busy.split("://", 1)[1] in call.path
            return 412 if busy else 204

        return [Answer(status(c), {}, b"") for c in calls]


def test_existing_subscriptions_are_moved_pipelined_and_a_busy_one_one_by_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a, b, c = (TopicPartition("persistent://t/ns/x", p) for p in range(3))
    admin = _Pipelining(b.name)
    keeper = _keeper(admin, monkeypatch)
    keeper.attach({a: Mark(None, -1), b: Mark(None, -1), c: Mark(Position(3, 4), 9)})
    assert keeper.attached == {a, b, c}
    creates, resets, props = admin.rounds
    assert len(creates) == 3
    assert resets == [
        "POST persistent/t/ns/x-partition-0/subscription/widehouse-app/resetcursor/0",
        "POST persistent/t/ns/x-partition-1/subscription/widehouse-app/resetcursor/0",
        "POST persistent/t/ns/x-partition-2/subscription/widehouse-app/resetcursor",
    ]
    # the properties of the two moved ones only, after their resets
    assert props == [
        "PUT persistent/t/ns/x-partition-0/subscription/widehouse-app/properties",
        "PUT persistent/t/ns/x-partition-2/subscription/widehouse-app/properties",
    ]
    assert admin.resets == [b.name]  # the busy one through the client, which retries a busy reset


class _Gated(_BusyOnce):
    """An admin whose subscriptions all exist; each reset waits for ``gate`` (a set-up that takes
    the broker seconds) and, while ``fail`` is set, raises it."""

    def __init__(self) -> None:
        super().__init__("", SubscriptionBusyError("unused"))
        self.gate = threading.Event()
        self.fail: Exception | None = None

    def reset_cursor_to_time(self, topic: str, _sub: str, _ms: int) -> None:
        assert self.gate.wait(10)
        self.resets.append(topic)
        if self.fail is not None:
            raise self.fail


class _Consumer:
    def __init__(self) -> None:
        self.acked: list[tuple[int, int]] = []
        self.closed = False

    def acknowledge_cumulative_async(self, message_id: Any, _callback: Any) -> None:
        self.acked.append((message_id.ledger_id(), message_id.entry_id()))

    def close_async(self, _callback: Any) -> None:
        self.closed = True


def _gated_keeper(monkeypatch: pytest.MonkeyPatch) -> tuple[SubscriptionKeeper, _Gated, dict[Any, _Consumer]]:
    admin = _Gated()
    keeper = _keeper(admin, monkeypatch)
    consumers: dict[Any, _Consumer] = {}

    def subscribe(parts: list[TopicPartition]) -> dict[TopicPartition, Any]:
        return {tp: consumers.setdefault(tp, _Consumer()) for tp in parts}

    monkeypatch.setattr(keeper, "_subscribe", subscribe)
    return keeper, admin, consumers


def test_subscriptions_are_set_up_beside_the_trigger_and_commits_meanwhile_acked_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a, b = TopicPartition("persistent://t/ns/x", 0), TopicPartition("persistent://t/ns/x", 1)
    keeper, admin, consumers = _gated_keeper(monkeypatch)
    keeper.attach_soon({a: Mark(None, -1)})  # returns while the broker still works on it
    assert keeper.attached == set()
    keeper.commit({a: Mark(Position(5, 7), 8)})  # the first batch commits before it is attached
    keeper.attach_soon({a: Mark(None, -1), b: Mark(None, -1)})  # a set-up runs: nothing more now
    admin.gate.set()
    keeper.settle()
    assert keeper.attached == {a}
    assert consumers[a].acked == [(5, 7)]  # the commit made meanwhile, acked once attached
    keeper.attach_soon({a: Mark(None, -1), b: Mark(None, -1)})  # the next trigger: what is missing
    keeper.settle()
    assert keeper.attached == {a, b}
    assert admin.resets == [a.name, b.name]


def test_a_failed_set_up_is_raised_by_the_next_trigger_and_logged_at_close(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    a, b = TopicPartition("persistent://t/ns/x", 0), TopicPartition("persistent://t/ns/x", 1)
    keeper, admin, _consumers = _gated_keeper(monkeypatch)
    admin.fail = PulsarError("the broker refused the token")
    admin.gate.set()
    keeper.attach_soon({a: Mark(None, -1)})
    keeper._wait_pending()
    with pytest.raises(PulsarError, match="refused the token"):
        keeper.attach_soon({a: Mark(None, -1)})
    keeper.attach_soon({b: Mark(None, -1)})  # the error was raised once; a new set-up runs
    keeper.close()  # waits for it; its error is logged, not raised
    assert any("setting up subscription widehouse-app failed" in r.getMessage() for r in caplog.records)


def test_a_partition_detached_during_its_set_up_is_not_left_attached(monkeypatch: pytest.MonkeyPatch) -> None:
    a = TopicPartition("persistent://t/ns/x", 0)
    keeper, admin, consumers = _gated_keeper(monkeypatch)
    keeper.attach_soon({a: Mark(None, -1)})
    threading.Timer(0.2, admin.gate.set).start()
    keeper.detach([a])  # waits for the set-up, then closes what it attached
    assert keeper.attached == set()
    assert consumers[a].closed

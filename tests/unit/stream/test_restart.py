"""The restart policy of streaming queries, driven by a fake clock (expected times written by hand)."""

from __future__ import annotations

from pathlib import Path

import pytest

from widehouse.errors import ConfigError
from widehouse.settings import StreamSettings
from widehouse.stream.restart import GiveUp, Restart, RestartBook, RestartPolicy


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now


def test_backoff_doubles_up_to_the_cap() -> None:
    policy = RestartPolicy(max_restarts=10, initial_s=1.0, cap_s=10.0)
    assert [policy.delay(n) for n in range(1, 8)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0, 10.0]
    assert policy.delay(10_000) == 10.0  # no overflow however long it keeps failing


def test_a_restart_waits_for_its_backoff_on_the_clock() -> None:
    clock = FakeClock()
    book = RestartBook(RestartPolicy(max_restarts=3, initial_s=2.0, cap_s=60.0))
    assert book.failed("g001", "boom", clock.now) == Restart(at=1002.0, attempt=1)
    assert book.due(clock.advance(1.9)) == []
    assert book.due(clock.advance(0.1)) == ["g001"]
    assert book.due(clock.advance(100)) == []  # restarted once, not again
    assert book.failed("g001", "boom", clock.now) == Restart(at=clock.now + 4.0, attempt=2)


def test_give_up_after_max_restarts_consecutive_failures_with_a_clear_error() -> None:
    clock = FakeClock()
    book = RestartBook(RestartPolicy(max_restarts=2, initial_s=1.0, cap_s=5.0))
    assert isinstance(book.failed("g007", "broker down", clock.now), Restart)
    assert book.due(clock.advance(1)) == ["g007"]
    assert isinstance(book.failed("g007", "broker down", clock.now), Restart)
    assert book.due(clock.advance(2)) == ["g007"]
    decision = book.failed("g007", "broker still down", clock.now)
    assert decision == GiveUp(
        "slot group g007 failed 3 time(s) in a row without committing a batch "
        "(WIDEHOUSE_STREAM_MAX_RESTARTS=2); giving up. Last error: broker still down"
    )
    assert book.pending == {}


def test_zero_restarts_gives_up_at_the_first_failure() -> None:
    book = RestartBook(RestartPolicy(max_restarts=0, initial_s=1.0, cap_s=1.0))
    assert isinstance(book.failed("g001", "x", 0.0), GiveUp)


def test_a_committed_batch_resets_the_count_and_the_backoff() -> None:
    """Four transient failures over an app's life, each followed by progress, never kill it."""
    clock = FakeClock()
    book = RestartBook(RestartPolicy(max_restarts=1, initial_s=3.0, cap_s=60.0))
    for _ in range(4):
        decision = book.failed("g001", "transient", clock.now)
        assert decision == Restart(at=clock.now + 3.0, attempt=1)
        assert book.due(clock.advance(3.0)) == ["g001"]
        book.committed("g001")
        clock.advance(3600)
    # without a commit in between, the second failure in a row exceeds max_restarts=1
    assert isinstance(book.failed("g001", "again", clock.now), Restart)
    assert book.due(clock.advance(3.0)) == ["g001"]
    assert isinstance(book.failed("g001", "again", clock.now), GiveUp)


def test_groups_are_counted_separately() -> None:
    clock = FakeClock()
    book = RestartBook(RestartPolicy(max_restarts=5, initial_s=1.0, cap_s=60.0))
    book.failed("a", "x", clock.now)
    book.failed("a", "x", clock.advance(0))
    book.failed("b", "y", clock.now)
    assert book.failures == {"a": 2, "b": 1}
    assert book.pending == {"a": 1002.0, "b": 1001.0}
    assert book.due(clock.advance(1.0)) == ["b"]
    assert book.due(clock.advance(1.0)) == ["a"]
    book.committed("b")
    assert book.failures == {"a": 2}


def test_policy_from_settings_and_bad_policies_name_the_values() -> None:
    stream = StreamSettings(
        checkpoint_root="/c", max_restarts=4, restart_backoff_s=0.5, restart_backoff_max_s=8
    )
    assert RestartPolicy.of(stream) == RestartPolicy(4, 0.5, 8.0)
    with pytest.raises(ConfigError, match=r"backoff 9\.0 s must be > 0 and <= its cap 8\.0 s"):
        RestartPolicy(1, 9.0, 8.0)
    with pytest.raises(ConfigError, match=r"max_restarts=-1"):
        RestartPolicy(-1, 1.0, 1.0)
    with pytest.raises(ConfigError, match="WIDEHOUSE_STREAM_RESTART_BACKOFF_SECONDS=9"):
        StreamSettings(checkpoint_root="/c", restart_backoff_s=9, restart_backoff_max_s=8)


def test_a_restart_that_cannot_start_yet_is_retried_not_fatal(tmp_path: Path) -> None:
    """A group restarting while its sink is still down (ClickHouse killed) must not end the app:
    the failed start is booked like a failed batch and retried after the backoff; a checkpoint the
    guard refuses is given up at once (retrying cannot help)."""
    from tests.conftest import settings_for
    from widehouse.errors import CheckpointError, ClickHouseError
    from widehouse.stream.options import GroupSpec, RunOptions
    from widehouse.stream.spark.job import StreamApp

    settings = settings_for(tmp_path, WIDEHOUSE_STREAM_RESTART_BACKOFF_SECONDS="1")
    groups = [GroupSpec("g001", ("a",)), GroupSpec("g002", ("b",))]
    app = StreamApp(settings, groups, RunOptions(), spark=object())
    outcomes: dict[str, list[object]] = {
        "g001": [ClickHouseError("connection refused"), "query"],
        "g002": [CheckpointError("checkpoint was reset")],
    }

    def start(group: GroupSpec) -> object:
        outcome = outcomes[group.name].pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return _RunningQuery()

    app._start = start  # type: ignore[method-assign]
    app.book.pending = {"g001": 0.0, "g002": 0.0}
    assert app.supervise() == {"g002": "checkpoint was reset"}
    assert "g001" in app.book.pending and app.book.failures["g001"] == 1
    app.book.pending["g001"] = 0.0
    app.supervise()
    assert isinstance(app.queries["g001"], _RunningQuery) and not app.book.pending


class _RunningQuery:
    isActive = True  # noqa: N815 (Spark's StreamingQuery attributes)
    lastProgress = None  # noqa: N815

"""A stream app starts its groups' queries side by side (``StreamApp._start_all``)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.conftest import settings_for
from widehouse.errors import ClickHouseError
from widehouse.stream.options import GroupSpec, RunOptions
from widehouse.stream.spark.job import StreamApp

GROUPS = [GroupSpec("g001", ("a",)), GroupSpec("g002", ("b",)), GroupSpec("g003", ("c",))]


def test_the_groups_queries_start_at_the_same_time(tmp_path: Path) -> None:
    app = StreamApp(settings_for(tmp_path), GROUPS, RunOptions(), spark=object())
    # every start waits for the others: started one after the other, the first would time out
    together = threading.Barrier(len(GROUPS), timeout=10)

    def start(group: GroupSpec) -> str:
        together.wait()
        return f"query {group.name}"

    app._start = start  # type: ignore[method-assign]
    app._start_all(GROUPS)
    assert app.queries == {"g001": "query g001", "g002": "query g002", "g003": "query g003"}


def test_a_group_that_fails_to_start_leaves_the_started_ones_to_stop(tmp_path: Path) -> None:
    app = StreamApp(settings_for(tmp_path), GROUPS, RunOptions(), spark=object())

    def start(group: GroupSpec) -> str:
        if group.name == "g002":
            raise ClickHouseError("connection refused")
        return f"query {group.name}"

    app._start = start  # type: ignore[method-assign]
    with pytest.raises(ClickHouseError, match="connection refused"):
        app._start_all(GROUPS)
    assert app.queries == {"g001": "query g001", "g003": "query g003"}  # what stop() will stop


def test_when_several_groups_fail_to_start_the_first_is_raised_and_the_others_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    app = StreamApp(settings_for(tmp_path), GROUPS, RunOptions(), spark=object())

    def start(group: GroupSpec) -> str:
        if group.name != "g002":
            raise ClickHouseError(f"{group.name}: connection refused")
        return f"query {group.name}"

    app._start = start  # type: ignore[method-assign]
    with caplog.at_level("ERROR", logger="widehouse.stream"), pytest.raises(ClickHouseError, match="g001"):
        app._start_all(GROUPS)
    assert app.queries == {"g002": "query g002"}
    assert "group g003: could not start: g003: connection refused" in caplog.text


def test_a_single_group_starts_on_the_callers_thread(tmp_path: Path) -> None:
    app = StreamApp(settings_for(tmp_path), GROUPS[:1], RunOptions(), spark=object())
    threads: list[threading.Thread] = []

    def start(group: GroupSpec) -> str:
        threads.append(threading.current_thread())
        return f"query {group.name}"

    app._start = start  # type: ignore[method-assign]
    app._start_all(GROUPS[:1])
    assert threads == [threading.current_thread()] and app.queries == {"g001": "query g001"}

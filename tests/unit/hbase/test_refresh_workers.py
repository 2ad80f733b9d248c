"""The refresh's worker threads: every bucket taken once, and none taken after a worker failed
(pure logic: the per-bucket work is replaced; the real refresh runs in the integration tests)."""

from __future__ import annotations

import datetime as dt
import threading
from typing import Any

import pytest

from widehouse.hbase import refresh
from widehouse.hbase.day import FamilyWrite
from widehouse.hbase.daytable import DayTable
from widehouse.settings import HBaseSettings

SPEC = DayTable("t", 8, "uid", "long", (("logins", "count"),), ())


class Client:
    """What a worker asks of the ClickHouse client: a sibling it closes."""

    def sibling(self) -> Client:
        return Client()

    def close(self) -> None:
        pass


def _settings(workers: int) -> HBaseSettings:
    return HBaseSettings("127.0.0.1", 9090, refresh_workers=workers)


def test_every_bucket_is_taken_exactly_once_across_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    taken: list[int] = []
    lock = threading.Lock()

    def buckets(
        _client: Any, _settings: Any, _spec: Any, _table: Any, _day: Any, next_bucket: Any
    ) -> FamilyWrite:
        rows = 0
        while (bucket := next_bucket()) is not None:
            with lock:
                taken.append(bucket)
            rows += 10
        return FamilyWrite(rows, 0)

    monkeypatch.setattr(refresh, "_refresh_buckets", buckets)
    result = refresh._refresh_all(Client(), _settings(3), SPEC, None, dt.date(2026, 11, 22))  # type: ignore[arg-type]
    assert sorted(taken) == list(range(8)) and result == FamilyWrite(80, 0)


def test_after_a_worker_fails_no_other_bucket_is_started(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[int] = []
    first_failed = threading.Event()
    both_busy = threading.Barrier(2)

    def buckets(
        _client: Any, _settings: Any, _spec: Any, _table: Any, _day: Any, next_bucket: Any
    ) -> FamilyWrite:
        while (bucket := next_bucket()) is not None:
            started.append(bucket)
            if bucket < 2:
                both_busy.wait(5)  # each worker holds one bucket before bucket 0 fails
            if bucket == 0:
                first_failed.set()
                raise OSError("bucket 0 failed")
            first_failed.wait(5)  # the other worker's bucket ends after the failure
        return FamilyWrite(0, 0)

    monkeypatch.setattr(refresh, "_refresh_buckets", buckets)
    with pytest.raises(OSError, match="bucket 0 failed"):
        refresh._refresh_all(Client(), _settings(2), SPEC, None, dt.date(2026, 11, 22))  # type: ignore[arg-type]
    assert sorted(started) == [0, 1]  # of 8 buckets: the two in flight, then nothing

"""A batch's two sinks run side by side, and a failure in either ends the batch only once both have ended.

Pure orchestration (``BatchWriter._write_sinks``): each sink's own writes are stood in for here; the
real ClickHouse and Delta writes, their idempotence and the fault points' recovery are the
integration tests' (``tests/integration/test_stream_wide.py``).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from widehouse.stream.options import Fault, FaultInjected
from widehouse.stream.progress import BatchIdentity

WAIT = 5.0
"""Seconds a stand-in sink waits for the other before the test calls it sequential."""


class _Ledger:
    """Stands in for the ClickHouse ledger: the batch is new."""

    def begin(self, batch_id: int) -> bool:
        return True

    def close(self) -> None:
        pass


def _writer(
    tmp_path: Path, sinks: tuple[str, ...] = ("clickhouse", "delta"), faults: tuple[Fault, ...] = ()
) -> Any:
    from tests.support import batch_writer

    writer = batch_writer(tmp_path, sinks, faults=faults)
    writer.ledger = _Ledger()
    return writer


def _run(writer: Any, batch_id: int = 0) -> tuple[bool, list[str]]:
    from widehouse.stream.spark.batch import _Clock

    clock = _Clock()
    written = writer._write_sinks(object(), object(), BatchIdentity("app", "g001", batch_id), clock)
    return written, [name for name, _ in clock.laps]


def test_delta_appends_while_clickhouse_inserts(tmp_path: Path) -> None:
    writer = _writer(tmp_path)
    delta_started, clickhouse_started = threading.Event(), threading.Event()
    seen: dict[str, bool] = {}

    def clickhouse(outputs: Any, counts: Any, identity: BatchIdentity) -> None:
        clickhouse_started.set()
        seen["clickhouse saw delta"] = delta_started.wait(WAIT)

    def delta(outputs: Any, identity: BatchIdentity) -> None:
        delta_started.set()
        seen["delta saw clickhouse"] = clickhouse_started.wait(WAIT)
        seen["on a thread of its own"] = threading.current_thread() is not threading.main_thread()

    writer._write_clickhouse, writer._write_delta = clickhouse, delta
    try:
        assert _run(writer) == (True, ["clickhouse", "delta"])
    finally:
        writer.close()
    # sequential sinks would have waited WAIT seconds and seen False
    assert seen == {
        "clickhouse saw delta": True,
        "delta saw clickhouse": True,
        "on a thread of its own": True,
    }
    assert writer._sinks_pool is None  # close() ended the thread


def test_a_clickhouse_failure_is_raised_once_delta_has_ended(tmp_path: Path) -> None:
    writer = _writer(tmp_path)
    ended: list[str] = []

    def clickhouse(outputs: Any, counts: Any, identity: BatchIdentity) -> None:
        raise RuntimeError("insert refused")

    def delta(outputs: Any, identity: BatchIdentity) -> None:
        time.sleep(0.3)
        ended.append("delta")

    writer._write_clickhouse, writer._write_delta = clickhouse, delta
    try:
        with pytest.raises(RuntimeError, match="insert refused"):
            _run(writer)
        assert ended == ["delta"]  # no append outlives its batch
    finally:
        writer.close()


def test_clickhouses_failure_wins_over_deltas(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    writer = _writer(tmp_path)

    def clickhouse(outputs: Any, counts: Any, identity: BatchIdentity) -> None:
        raise RuntimeError("insert refused")

    def delta(outputs: Any, identity: BatchIdentity) -> None:
        raise OSError("disk full")

    writer._write_clickhouse, writer._write_delta = clickhouse, delta
    try:
        with (
            caplog.at_level("WARNING", logger="widehouse.stream"),
            pytest.raises(RuntimeError, match="insert refused"),
        ):
            _run(writer)
    finally:
        writer.close()
    assert "batch 0: the Delta sink failed too: disk full" in caplog.text


def test_a_delta_failure_is_raised_after_clickhouse_has_written(tmp_path: Path) -> None:
    writer = _writer(tmp_path)
    ended: list[str] = []

    def clickhouse(outputs: Any, counts: Any, identity: BatchIdentity) -> None:
        time.sleep(0.2)
        ended.append("clickhouse")

    def delta(outputs: Any, identity: BatchIdentity) -> None:
        raise OSError("disk full")

    writer._write_clickhouse, writer._write_delta = clickhouse, delta
    try:
        with pytest.raises(OSError, match="disk full"):
            _run(writer)
    finally:
        writer.close()
    assert ended == ["clickhouse"]


def test_the_fault_points_between_the_sinks_still_fire(tmp_path: Path) -> None:
    writer = _writer(tmp_path, faults=(Fault("after-clickhouse", 1, False), Fault("after-delta", 2, False)))
    appended: list[int] = []
    writer._write_clickhouse = lambda outputs, counts, identity: None
    writer._write_delta = lambda outputs, identity: appended.append(identity.batch_id)
    try:
        assert _run(writer, 0) == (True, ["clickhouse", "delta"])
        with pytest.raises(FaultInjected, match="after-clickhouse of batch 1"):
            _run(writer, 1)
        with pytest.raises(FaultInjected, match="after-delta of batch 2"):
            _run(writer, 2)
    finally:
        writer.close()
    assert appended == [0, 1, 2]  # the append of the batch cut short at after-clickhouse had ended


def test_one_sink_alone(tmp_path: Path) -> None:
    only_delta = _writer(tmp_path / "d", sinks=("delta",))
    only_delta._write_delta = lambda outputs, identity: None
    only_clickhouse = _writer(tmp_path / "c", sinks=("clickhouse",))
    only_clickhouse._write_clickhouse = lambda outputs, counts, identity: None
    try:
        assert _run(only_delta) == (False, ["delta"])
        assert _run(only_clickhouse) == (True, ["clickhouse"])
        assert only_clickhouse._sinks_pool is None  # no thread without Delta
    finally:
        only_delta.close()
        only_clickhouse.close()

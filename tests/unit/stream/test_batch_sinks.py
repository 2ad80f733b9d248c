"""A batch's two sinks run side by side, and a failure in either ends the batch only once both have
ended; what the sinks need from elsewhere (replay guard, ledger, offset log) is read while the driver
merges, and its failure comes before any sink writes.

Pure orchestration (``BatchWriter._write_sinks``): each sink's own writes are stood in for here; the
real ClickHouse and Delta writes, their idempotence and the fault points' recovery are the
integration tests' (``tests/integration/test_stream_wide.py``).
"""

from __future__ import annotations

import datetime as dt
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

    def open_lanes(self) -> None:
        pass

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
    written = "clickhouse" in writer.sinks and writer.ledger.begin(batch_id)
    writer._write_sinks(object(), object(), BatchIdentity("app", "g001", batch_id), clock, written)
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


class _ProgressLedger(_Ledger):
    """Its progress commit waits (up to WAIT seconds) for Delta's progress append to be running."""

    def __init__(self, fail: bool = False) -> None:
        self.appending = threading.Event()
        self.committing = threading.Event()
        self.fail = fail
        self.saw_delta: list[bool] = []

    def commit(self, identity: BatchIdentity, progress: Any) -> None:
        self.committing.set()
        self.saw_delta.append(self.appending.wait(WAIT))
        if self.fail:
            raise ConnectionError("ClickHouse went away")


class _ProgressBronze:
    """Delta's progress append: waits for ClickHouse's commit to be running, then ``sleep`` seconds."""

    def __init__(self, ledger: _ProgressLedger, sleep: float = 0.0, fail: bool = False) -> None:
        self.ledger = ledger
        self.sleep = sleep
        self.fail = fail
        self.saw_clickhouse: list[bool] = []
        self.ended: list[str] = []

    def append(self, table: Any, data: Any, app_id: str, version: int) -> None:
        self.ledger.appending.set()
        self.saw_clickhouse.append(self.ledger.committing.wait(WAIT))
        time.sleep(self.sleep)
        self.ended.append(table.name)
        if self.fail:
            raise OSError("disk full")


def _progress(writer: Any, write_clickhouse: bool = True) -> None:
    writer._write_progress([], BatchIdentity("app", "g001", 3), write_clickhouse)


def test_the_progress_rows_go_to_both_sinks_side_by_side(tmp_path: Path) -> None:
    """The batch's commit in ClickHouse and in Delta run at once: each waits for the other to have
    started (one after the other, the first would wait WAIT seconds and see False)."""
    from widehouse.contracts.tables import PROGRESS

    writer = _writer(tmp_path)
    ledger = writer.ledger = _ProgressLedger()
    bronze = writer.bronze = _ProgressBronze(ledger)
    try:
        _progress(writer)
    finally:
        writer.close()
    assert ledger.saw_delta == [True]
    assert bronze.saw_clickhouse == [True]
    assert bronze.ended == [PROGRESS]


def test_a_failed_progress_commit_is_raised_once_deltas_has_ended(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    writer = _writer(tmp_path)
    ledger = writer.ledger = _ProgressLedger(fail=True)
    bronze = writer.bronze = _ProgressBronze(ledger, sleep=0.3, fail=True)
    try:
        with (
            caplog.at_level("WARNING", logger="widehouse.stream"),
            pytest.raises(ConnectionError, match="went away"),
        ):
            _progress(writer)
        assert len(bronze.ended) == 1  # no append outlives its batch
    finally:
        writer.close()
    assert "batch 3: the Delta progress failed too: disk full" in caplog.text


def test_a_failed_progress_append_is_raised_after_clickhouse_committed(tmp_path: Path) -> None:
    writer = _writer(tmp_path)
    ledger = writer.ledger = _ProgressLedger()
    writer.bronze = _ProgressBronze(ledger, fail=True)
    try:
        with pytest.raises(OSError, match="disk full"):
            _progress(writer)
    finally:
        writer.close()
    assert ledger.saw_delta == [True]


def test_progress_to_one_sink_alone(tmp_path: Path) -> None:
    """Without Delta, ClickHouse's commit alone (no thread); a batch ClickHouse already holds commits
    in Delta only."""
    only_clickhouse = _writer(tmp_path / "c", sinks=("clickhouse",))
    ledger = only_clickhouse.ledger = _ProgressLedger()
    ledger.appending.set()  # nothing to wait for
    try:
        _progress(only_clickhouse)
    finally:
        only_clickhouse.close()
    assert ledger.saw_delta == [True]
    assert only_clickhouse._sinks_pool is None

    held = _writer(tmp_path / "h")
    held_ledger = held.ledger = _ProgressLedger()
    held_ledger.committing.set()  # Delta's append would wait for it
    bronze = held.bronze = _ProgressBronze(held_ledger)
    try:
        _progress(held, write_clickhouse=False)
    finally:
        held.close()
    assert held_ledger.saw_delta == []
    assert len(bronze.ended) == 1


class _StopError(Exception):
    """Ends a batch where a test has seen enough."""


def _standing_merge(monkeypatch: pytest.MonkeyPatch, settle: Any) -> None:
    """The batch's read and merge stood in for: ``settle`` is the merge's first step, the rest
    return placeholders."""
    from widehouse.stream import merge
    from widehouse.stream.spark import batch

    monkeypatch.setattr(batch, "unpack", lambda packed, plan: "out")
    monkeypatch.setattr(merge, "settle", settle)
    monkeypatch.setattr(merge, "partials", lambda out, plan, name: "rows")
    monkeypatch.setattr(merge, "side", lambda out, kind, app, group, batch_id: "side")
    monkeypatch.setattr(merge, "topic_stats", lambda out: {})
    monkeypatch.setattr(merge, "hour_counts", lambda out, app, group, batch_id: "counts")


class _Frame:
    def toArrow(self) -> None:
        return None


def _recording_sinks(writer: Any) -> list[str]:
    """Both sinks stood in for: each appends its name to the list returned when it is called."""
    written: list[str] = []
    writer._write_clickhouse = lambda outputs, counts, identity: written.append("clickhouse")
    writer._write_delta = lambda outputs, identity: written.append("delta")
    return written


def test_the_guard_ledger_and_offset_log_are_read_while_the_driver_merges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = _writer(tmp_path)
    merging, reading = threading.Event(), threading.Event()
    seen: dict[str, bool] = {}
    ended: list[str] = []

    def settle(out: Any, plan: Any) -> Any:
        merging.set()
        seen["the merge saw the reads"] = reading.wait(WAIT)
        raise _StopError

    def ahead(identity: BatchIdentity) -> Any:
        from widehouse.source.metrics import BatchLog
        from widehouse.stream.spark.batch import Ready

        reading.set()
        seen["the reads saw the merge"] = merging.wait(WAIT)
        seen["on the writer's thread"] = threading.current_thread() is not threading.main_thread()
        time.sleep(0.2)
        ended.append("ahead")
        return Ready(True, BatchLog([], None), recorded=False)

    _standing_merge(monkeypatch, settle)
    writer._ahead = ahead
    try:
        with pytest.raises(_StopError):  # the merge's failure is the batch's ...
            writer._write(_Frame(), 0)
        assert ended == ["ahead"]  # ... raised once the reads have ended
    finally:
        writer.close()
    # one after the other, each would have waited WAIT seconds and seen False
    assert seen == {
        "the merge saw the reads": True,
        "the reads saw the merge": True,
        "on the writer's thread": True,
    }


def test_a_refused_replay_ends_the_batch_before_any_sink_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from widehouse.stream.replay_guard import CatalogChangedError

    writer = _writer(tmp_path)
    written = _recording_sinks(writer)

    def ahead(identity: BatchIdentity) -> Any:
        raise CatalogChangedError("batch 0 was first written with another catalog")

    _standing_merge(monkeypatch, lambda out, plan: out)
    writer._ahead = ahead
    try:
        with pytest.raises(CatalogChangedError, match="another catalog"):
            writer._write(_Frame(), 0)
    finally:
        writer.close()
    assert written == []


def _guard_files(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The replay guard's records in memory (its own logic runs; Hadoop's file system is stood in
    for), and an offset log entry with nothing in it."""
    from tests.support import MemoryFiles
    from widehouse.source import spark as source_spark
    from widehouse.source.metrics import BatchLog
    from widehouse.stream.spark import replay

    files = MemoryFiles()

    class _Files:
        @staticmethod
        def of(spark: Any) -> MemoryFiles:
            return files

    monkeypatch.setattr(replay, "HadoopFiles", _Files)
    monkeypatch.setattr(source_spark, "read_batch_log", lambda spark, checkpoint, batch: BatchLog([], None))
    return files


def _failing_merge(out: Any, plan: Any) -> Any:
    raise MemoryError("the merge ran out of memory")


def test_a_batch_whose_merge_fails_leaves_no_record_so_another_catalog_may_replay_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from widehouse.stream.replay_guard import BatchRecord, guard_replay

    files = _guard_files(monkeypatch)
    _standing_merge(monkeypatch, _failing_merge)
    writer = _writer(tmp_path)
    try:
        with pytest.raises(MemoryError):
            writer._write(_Frame(), 4)
    finally:
        writer.close()
    assert files.files == {}  # the guard recorded batch 4, then dropped the record: no sink wrote
    # the replay, under a changed catalog, is not refused
    assert guard_replay(files, writer.checkpoint, BatchRecord("app", "g001", 4, "a changed catalog"))


def test_a_replays_record_stays_when_its_merge_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A record the run found (an earlier run's, which may have written sinks) is never dropped."""
    from widehouse.stream.replay_guard import BatchRecord, CatalogChangedError, guard_replay, record_path

    files = _guard_files(monkeypatch)
    _standing_merge(monkeypatch, _failing_merge)
    writer = _writer(tmp_path)
    earlier = BatchRecord("app", "g001", 4, writer.fingerprint)
    guard_replay(files, writer.checkpoint, earlier)
    try:
        with pytest.raises(MemoryError):
            writer._write(_Frame(), 4)
    finally:
        writer.close()
    assert files.files == {record_path(writer.checkpoint, 4): earlier.to_json()}
    with pytest.raises(CatalogChangedError):
        guard_replay(files, writer.checkpoint, BatchRecord("app", "g001", 4, "a changed catalog"))


def test_a_ledger_failure_after_the_guard_recorded_drops_the_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = _guard_files(monkeypatch)
    _standing_merge(monkeypatch, lambda out, plan: out)
    writer = _writer(tmp_path)
    written = _recording_sinks(writer)

    class _Unreachable(_Ledger):
        def begin(self, batch_id: int) -> bool:
            raise ConnectionError("ClickHouse is not reachable")

    writer.ledger = _Unreachable()
    try:
        with pytest.raises(ConnectionError, match="not reachable"):
            writer._write(_Frame(), 4)
    finally:
        writer.close()
    assert written == []
    assert files.files == {}


def test_a_record_that_cannot_be_dropped_is_logged_and_the_batchs_own_error_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    files = _guard_files(monkeypatch)

    def refuse(path: str) -> None:
        raise OSError("read-only file system")

    files.delete = refuse
    _standing_merge(monkeypatch, _failing_merge)
    writer = _writer(tmp_path)
    try:
        with caplog.at_level("WARNING", logger="widehouse.stream"), pytest.raises(MemoryError):
            writer._write(_Frame(), 4)
    finally:
        writer.close()
    assert "batch 4: the replay guard's record was not dropped: read-only file system" in caplog.text
    assert len(files.files) == 1  # the record stays: such a replay is refused, as after a kill


_TOTALS = {
    "rows_in": 0,
    "rows_out": 0,
    "bad": 0,
    "late": 0,
    "lag": 0,
    "watermark": dt.datetime(2024, 5, 1, tzinfo=dt.UTC),
}
"""A batch's group progress row, stood in for (the log line reads it)."""


class _LanesLedger(_Ledger):
    """Records when and where its lanes are opened; ``fail`` makes opening them raise."""

    def __init__(self, fail: bool = False) -> None:
        self.opened: list[str] = []
        self.open = threading.Event()
        self.fail = fail

    def open_lanes(self) -> None:
        self.opened.append(threading.current_thread().name)
        self.open.set()
        if self.fail:
            raise OSError("connection refused")


class _ReadingFrame:
    """A batch's read that waits (up to WAIT seconds) for the ledger's lanes to be opening."""

    def __init__(self, ledger: _LanesLedger) -> None:
        self.ledger = ledger
        self.saw_lanes: list[bool] = []

    def toArrow(self) -> None:
        self.saw_lanes.append(self.ledger.open.wait(WAIT))


@pytest.mark.parametrize("fail", [False, True])
def test_the_first_batch_opens_the_clickhouse_lanes_while_its_tasks_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail: bool
) -> None:
    """A run's first batch opens the ledger's connections on the writer's thread during its read,
    before the reads that precede the sinks (``_ahead``, next on that thread); later batches do not
    open them again, and a writer without ClickHouse never does. A failure to open them is left to
    the inserts (stood in for here), which open what is missing and raise the batch's error."""
    writer = _writer(tmp_path)
    ledger = writer.ledger = _LanesLedger(fail)
    written = _recording_sinks(writer)
    order: list[str] = []

    def ahead(identity: BatchIdentity) -> Any:
        from widehouse.source.metrics import BatchLog
        from widehouse.stream.spark.batch import Ready

        order.append(f"ahead after {len(ledger.opened)} openings")
        return Ready(True, BatchLog([], None), recorded=False)

    _standing_merge(monkeypatch, lambda out, plan: out)
    monkeypatch.setattr("widehouse.stream.spark.batch.progress_rows", lambda *args: [_TOTALS])
    writer._ahead = ahead
    writer._write_progress = lambda rows, identity, write_clickhouse: None
    frame = _ReadingFrame(ledger)
    try:
        writer._write(frame, 0)
        writer._write(frame, 1)
    finally:
        writer.close()
    assert frame.saw_lanes[0] is True  # the first read saw them opening (opened after it: waits WAIT)
    assert len(ledger.opened) == 1
    assert ledger.opened[0].startswith("sinks-")  # the writer's thread
    assert order == ["ahead after 1 openings"] * 2
    assert written == ["clickhouse", "delta"] * 2

    only_delta = _writer(tmp_path / "d", sinks=("delta",))
    delta_ledger = only_delta.ledger = _LanesLedger()
    _recording_sinks(only_delta)
    only_delta._ahead = ahead
    only_delta._write_progress = lambda rows, identity, write_clickhouse: None
    try:
        only_delta._write(_Frame(), 0)
    finally:
        only_delta.close()
    assert delta_ledger.opened == []

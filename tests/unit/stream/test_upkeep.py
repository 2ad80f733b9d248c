"""Bronze upkeep (``widehouse.stream.upkeep``) on real delta-rs tables in a temporary directory:
crowded partitions are compacted without changing a row or an application transaction, rewritten
files are vacuumed after the retention, files no commit names (an append cut short) after an hour,
the log stays short, existing tables get the properties."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests.conftest import settings_for
from widehouse.settings import DeltaSettings
from widehouse.stream.bronze import BronzeTable, BronzeWriter
from widehouse.stream.options import GroupSpec, RunOptions
from widehouse.stream.spark.job import StreamApp
from widehouse.stream.upkeep import BronzeUpkeep, crowded_partitions, orphan_age_s, upkeep_table

D1 = dt.date(2024, 5, 1)
SCHEMA = pa.schema(
    [
        pa.field("uid", pa.int64(), nullable=False),
        pa.field("v", pa.int64()),
        pa.field("wh_date", pa.date32()),
        pa.field("wh_hour", pa.int32()),
    ]
)


def _table(tmp_path: Path, retention_s: int = 900, name: str = "t") -> BronzeTable:
    interval = f"interval {retention_s} seconds"
    return BronzeTable(
        name,
        str(tmp_path / name),
        SCHEMA,
        ("wh_date", "wh_hour"),
        2,
        (("delta.logRetentionDuration", interval), ("delta.deletedFileRetentionDuration", interval)),
    )


def _rows(batch: int, hour: int) -> pa.Table:
    """Two hand-written rows of one batch in one hour: uids 10*batch and 10*batch+1."""
    return pa.table(
        {
            "uid": [10 * batch, 10 * batch + 1],
            "v": [batch, -batch],
            "wh_date": pa.array([D1, D1], pa.date32()),
            "wh_hour": pa.array([hour, hour], pa.int32()),
        },
        schema=SCHEMA,
    )


def _read(path: str) -> list[dict[str, Any]]:
    from deltalake import DeltaTable

    return sorted(pa.table(DeltaTable(path).to_pyarrow_table()).to_pylist(), key=lambda r: r["uid"])


def _live_files(path: str) -> int:
    from deltalake import DeltaTable

    return len(DeltaTable(path).file_uris())


def _actions(rows: list[tuple[Any, int, int]]) -> pa.Table:
    """Add actions as ``get_add_actions(flatten=True)`` lists them: (date, hour, size) per file."""
    return pa.table(
        {
            "size_bytes": pa.array([r[2] for r in rows], pa.int64()),
            "partition.wh_date": pa.array([r[0] for r in rows], pa.date32()),
            "partition.wh_hour": pa.array([r[1] for r in rows], pa.int32()),
        }
    )


def test_crowded_partitions_count_only_small_files_and_name_the_partition() -> None:
    big = 200 * 1024 * 1024
    actions = _actions(
        [(D1, 13, 500)] * 3  # 3 small files: crowded at min_files=3
        + [(D1, 14, 500)] * 2
        + [(D1, 14, big)] * 5  # 2 small + 5 big: not crowded
        + [(dt.date(2024, 4, 30), 9, 10)] * 4
    )
    assert crowded_partitions(actions, ("wh_date", "wh_hour"), min_files=3) == [
        [("wh_date", "=", "2024-04-30"), ("wh_hour", "=", "9")],
        [("wh_date", "=", "2024-05-01"), ("wh_hour", "=", "13")],
    ]
    assert crowded_partitions(actions, ("wh_date", "wh_hour"), min_files=5) == []
    unpartitioned = pa.table({"size_bytes": pa.array([1, 2, 3], pa.int64())})
    assert crowded_partitions(unpartitioned, (), min_files=3) == [[]]
    assert crowded_partitions(unpartitioned, (), min_files=4) == []


def test_compaction_keeps_every_row_and_the_replay_guard(tmp_path: Path) -> None:
    table = _table(tmp_path)
    writer = BronzeWriter()
    writer.ensure(table)
    for batch in range(1, 21):  # 16 appends to hour 13, 4 to hour 14
        assert writer.append(table, _rows(batch, 13 if batch <= 16 else 14), "app:g1:t", batch)
    want = [
        {"uid": 10 * b + i, "v": b if i == 0 else -b, "wh_date": D1, "wh_hour": 13 if b <= 16 else 14}
        for b in range(1, 21)
        for i in (0, 1)
    ]
    assert _read(table.path) == want
    assert _live_files(table.path) == 20

    result = upkeep_table(table, 16)
    assert (result.partitions, result.files_removed, result.files_added) == (1, 16, 1)
    assert _live_files(table.path) == 5  # hour 13 in one file, hour 14's four left alone
    assert _read(table.path) == want
    # the application transaction survives: a replay of batch 20 is skipped, batch 21 is written
    assert writer.append(table, _rows(20, 14), "app:g1:t", 20) is False
    assert writer.append(table, _rows(21, 14), "app:g1:t", 21) is True
    assert writer.version(table.path, "app:g1:t") == 21
    assert len(_read(table.path)) == 42
    # nothing crowded now: a second round changes nothing
    assert upkeep_table(table, 16).partitions == 0


def test_rewritten_files_are_deleted_once_older_than_the_retention(tmp_path: Path) -> None:
    table = _table(tmp_path, retention_s=1)
    writer = BronzeWriter()
    writer.ensure(table)
    for batch in range(1, 5):
        writer.append(table, _rows(batch, 13), "app:g1:t", batch)
    parquet = lambda: sorted(p.name for p in Path(table.path).rglob("*.parquet"))  # noqa: E731
    assert len(parquet()) == 4
    first = upkeep_table(table, 4)
    assert (first.files_removed, first.vacuumed) == (4, 0)  # just rewritten: still kept
    assert len(parquet()) == 5
    time.sleep(1.5)
    assert upkeep_table(table, 4).vacuumed == 4
    assert len(parquet()) == 1
    assert [r["uid"] for r in _read(table.path)] == [10, 11, 20, 21, 30, 31, 40, 41]


def _orphan(table: BronzeTable, name: str, age_s: float) -> Path:
    """A data file no commit names, as an append cut short by a crash leaves one: a copy of one of
    the table's data files in its partition directory, last modified ``age_s`` ago."""
    live = sorted(Path(table.path).rglob("part-*.parquet"))[0]
    orphan = live.parent / f"part-00000-{name}-c000.snappy.parquet"
    shutil.copy(live, orphan)
    when = time.time() - age_s
    os.utime(orphan, (when, when))
    return orphan


def test_orphan_age_is_the_retention_in_whole_hours_at_least_one() -> None:
    assert orphan_age_s(1) == 3600
    assert orphan_age_s(900) == 3600  # the default retention
    assert orphan_age_s(3600) == 3600
    assert orphan_age_s(3601) == 7200
    assert orphan_age_s(2 * 86400) == 2 * 86400


def test_a_full_round_deletes_only_files_no_commit_names_older_than_an_hour(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    table = _table(tmp_path)  # retention 900 s: orphans go after an hour
    writer = BronzeWriter()
    writer.ensure(table)
    for batch in range(1, 5):
        writer.append(table, _rows(batch, 13), "app:g1:t", batch)
    two_hours = time.time() - 7200
    for uri in DeltaTable(table.path).file_uris():  # old files: the compaction below removes them
        os.utime(uri.removeprefix("file://"), (two_hours, two_hours))
    before = DeltaTable(table.path).version()
    assert upkeep_table(table, 4).files_removed == 4  # their removal is seconds old: kept 900 s
    stale = _orphan(table, "stale", 7200)
    young = _orphan(table, "young", 1800)  # older than the retention, not an hour
    fresh = _orphan(table, "fresh", 0)  # an append in flight

    now = [1000.0]
    upkeep = BronzeUpkeep([table], every=60, min_files=16, retention_s=900, clock=lambda: now[0])
    (first,) = upkeep.run_once()
    assert first.full and first.vacuumed == 1
    assert not stale.exists() and young.exists() and fresh.exists()
    # every committed row is there, and a reader of the version before the compaction still reads it
    assert [r["uid"] for r in _read(table.path)] == [10, 11, 20, 21, 30, 31, 40, 41]
    assert DeltaTable(table.path, version=before).to_pyarrow_table().num_rows == 8

    late = _orphan(table, "late", 7200)
    now[0] += 60
    (lite,) = upkeep.run_once()  # a minute later: a lite round, orphans left
    assert (lite.full, lite.vacuumed) == (False, 0) and late.exists()
    now[0] += 3540
    (second,) = upkeep.run_once()  # an hour after the first full round: the next one
    assert second.full and not late.exists() and young.exists()
    assert len(_read(table.path)) == 8


def test_without_a_retention_no_round_is_full(tmp_path: Path) -> None:
    table = _table(tmp_path)
    writer = BronzeWriter()
    writer.ensure(table)
    writer.append(table, _rows(1, 13), "app:g1:t", 1)
    stale = _orphan(table, "stale", 7200)
    (result,) = BronzeUpkeep([table], every=60, min_files=16).run_once()
    assert not result.full and stale.exists()


def test_the_log_keeps_only_the_retention_s_commits(tmp_path: Path) -> None:
    """delta-rs drops commit files older than the retention as it checkpoints (every 100 commits)."""
    table = _table(tmp_path, retention_s=1)
    writer = BronzeWriter()
    writer.ensure(table)
    log = Path(table.path) / "_delta_log"
    for batch in range(1, 211):
        writer.append(table, _rows(batch, 13), "app:g1:t", batch)
        if batch in (100, 199):
            time.sleep(1.2)  # the commits so far are past the retention at the next checkpoint
    commits = sorted(log.glob("*.json"))
    assert len(commits) < 120, len(commits)  # 210 with Delta's default 30 days
    assert int(commits[0].stem) >= 100
    assert writer.version(table.path, "app:g1:t") == 210
    assert len(_read(table.path)) == 420


def test_an_existing_table_gets_the_properties_once(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    table = _table(tmp_path)
    DeltaTable.create(table.path, SCHEMA, partition_by=list(table.partition_by))  # no properties
    BronzeWriter().ensure(table)
    delta = DeltaTable(table.path)
    assert delta.metadata().configuration["delta.logRetentionDuration"] == "interval 900 seconds"
    assert delta.metadata().configuration["delta.deletedFileRetentionDuration"] == "interval 900 seconds"
    version = delta.version()
    BronzeWriter().ensure(table)  # the same values: no commit
    assert DeltaTable(table.path).version() == version
    shorter = replace(table, properties=(("delta.logRetentionDuration", "interval 60 seconds"),))
    BronzeWriter().ensure(shorter)  # a changed retention is applied
    configuration = DeltaTable(table.path).metadata().configuration
    assert configuration["delta.logRetentionDuration"] == "interval 60 seconds"


def test_the_upkeep_thread_keeps_going_past_a_failing_table(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    good = _table(tmp_path, name="good")
    writer = BronzeWriter()
    writer.ensure(good)
    for batch in range(1, 5):
        writer.append(good, _rows(batch, 13), "app:g1:good", batch)
    missing = _table(tmp_path, name="missing")  # never created
    upkeep = BronzeUpkeep([missing, good], every=0.05, min_files=4)
    with caplog.at_level("WARNING", logger="widehouse.stream.upkeep"):
        upkeep.start()
        deadline = time.monotonic() + 30
        while _live_files(good.path) != 1:
            assert time.monotonic() < deadline, "the good table was never compacted"
            time.sleep(0.05)
        upkeep.stop()
    assert f"delta upkeep of {missing.path} failed" in caplog.text
    assert upkeep.rounds >= 1
    rounds = upkeep.rounds
    time.sleep(0.2)
    assert upkeep.rounds == rounds  # stopped


def test_a_stream_app_keeps_its_bronze_tables_up_as_the_settings_say(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    table = _table(tmp_path)
    app = StreamApp(settings, [GroupSpec("g001", ("a",))], RunOptions(), spark=object())
    assert settings.delta.bronze_upkeep_seconds == 60.0  # the default
    app._keep_up([table])
    assert app.upkeep is not None and app.upkeep.tables == [table]
    assert (app.upkeep.every, app.upkeep.min_files) == (60.0, 16)
    assert app.upkeep.orphans_after_s == 3600  # the default retention (900 s), in whole hours
    app.stop()
    assert app.upkeep is None
    off = replace(settings, delta=replace(settings.delta, bronze_upkeep_seconds=0.0))
    app = StreamApp(off, [GroupSpec("g001", ("a",))], RunOptions(), spark=object())
    app._keep_up([table])
    assert app.upkeep is None


def test_bronze_tables_carry_the_retention_setting() -> None:
    from widehouse.catalog import load_catalog
    from widehouse.settings import load_settings
    from widehouse.stream.bronze import bronze_tables

    catalog = load_catalog(load_settings().schemas_dir)
    tables = bronze_tables(catalog, DeltaSettings("/lake", bronze_retention_seconds=120), ("user_hourly",))
    for table in tables.values():
        assert dict(table.properties) == {
            "delta.logRetentionDuration": "interval 120 seconds",
            "delta.deletedFileRetentionDuration": "interval 120 seconds",
        }

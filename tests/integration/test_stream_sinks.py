"""The stream's ClickHouse side: tables created or migrated, inserts idempotent per batch (real engine)."""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from widehouse import clickhouse
from widehouse.catalog import load_catalog
from widehouse.contracts.tables import (
    COUNTS,
    COUNTS_SHAPE,
    LATE,
    LATE_SHAPE,
    PROGRESS_SHAPE,
    QUARANTINE,
    QUARANTINE_SHAPE,
)
from widehouse.settings import Settings
from widehouse.stream.commits import ClickHouseLedger
from widehouse.stream.progress import BatchIdentity
from widehouse.stream.tables import ensure_clickhouse

pytestmark = [pytest.mark.integration, pytest.mark.clickhouse]


@pytest.fixture(autouse=True)
def _clickhouse_running(services: Settings) -> None:
    """These tests use the session's ClickHouse (the local service, started with the others)."""


def test_tables_are_created_once_and_replayed_batches_change_nothing(settings: Settings) -> None:
    client = clickhouse.connect(settings.clickhouse)
    catalog = load_catalog(settings.schemas_dir)
    ensure_clickhouse(client, catalog)
    ensure_clickhouse(client, catalog)  # idempotent
    tables = {r[0] for r in client.query("SHOW TABLES").result_rows}
    assert {
        "user_hourly_partial",
        "user_daily_partial",
        "quarantine",
        "late_events",
        "stream_progress",
    } <= tables

    app = f"a-{uuid.uuid4().hex[:8]}"  # the service outlives a run: no old rows or tokens
    rows = pa.table(
        {
            "app": [app, app], "group": ["g", "g"], "batch_id": pa.array([5, 5], pa.int64()),
            "topic": ["persistent://t/n/x", "persistent://t/n/x"], "message_id": ["1:1:0", "1:2:0"],
            "publish_time": pa.array([1_700_000_000_000_000] * 2, pa.timestamp("us", tz="UTC")),
            "reason": ["malformed_json", "empty_payload"], "detail": ["", ""],
            "payload": pa.array([b"{x", b""], pa.binary()), "payload_bytes": pa.array([2, 0], pa.int64()),
        }
    ).cast(QUARANTINE_SHAPE.arrow_schema())  # fmt: skip
    batch = BatchIdentity(app, "g", 5)
    assert client.insert(QUARANTINE, rows, batch.token(QUARANTINE)) == 2
    client.insert(QUARANTINE, rows, batch.token(QUARANTINE))  # the same batch replayed after a crash
    count = f"SELECT count() FROM quarantine WHERE app = '{app}' AND batch_id = 5"
    assert client.query(count).result_rows == [(2,)]
    client.insert(QUARANTINE, rows, BatchIdentity(app, "g", 6).token(QUARANTINE))  # new data
    assert client.query(count).result_rows == [(4,)]


def _quarantine_rows(batch: int, ids: list[str]) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {"app": "ledger", "group": "g", "batch_id": batch, "topic": "persistent://t/n/x", "message_id": m,
             "publish_time": dt.datetime(2024, 5, 1, 13, tzinfo=dt.UTC), "reason": "malformed_json",
             "detail": "", "payload": b"{x", "payload_bytes": 2}
            for m in ids
        ],
        schema=QUARANTINE_SHAPE.arrow_schema(),
    )  # fmt: skip


def _counts_row(batch: int, group: str = "g") -> pa.Table:
    row = {"app": "ledger", "group": group, "batch_id": batch, "topic": "persistent://t/n/x",
           "publish_hour": dt.datetime(2024, 5, 1, 13, tzinfo=dt.UTC), "rows_in": 2, "rows_out": 0,
           "bad": 2, "late": 0}  # fmt: skip
    return pa.Table.from_pylist([row], schema=COUNTS_SHAPE.arrow_schema())


def _progress_row(batch: int) -> pa.Table:
    at = dt.datetime(2024, 5, 1, 14, tzinfo=dt.UTC)
    row = {"app": "ledger", "group": "g", "batch_id": batch, "topic": "*", "rows_in": 2, "rows_out": 0,
           "bad": 2, "late": 0, "lag": 0, "max_event_time": None, "min_publish_time": at,
           "max_publish_time": at, "batch_time": at, "committed_at": at, "duration_ms": 1,
           "watermark": at}  # fmt: skip
    return pa.Table.from_pylist([row], schema=PROGRESS_SHAPE.arrow_schema())


def test_a_replay_after_the_dedup_window_expired_changes_nothing(tmp_path: Path) -> None:
    from tests.conftest import settings_for

    database = f"ledger_{uuid.uuid4().hex[:8]}"
    client = clickhouse.connect(settings_for(tmp_path, WIDEHOUSE_CLICKHOUSE_DATABASE=database).clickhouse)
    try:
        ensure_clickhouse(client, load_catalog(settings_for(tmp_path).schemas_dir))
        for table in (QUARANTINE, COUNTS):
            client.command(f"ALTER TABLE {table} MODIFY SETTING non_replicated_deduplication_window = 1")
        count = "SELECT count() FROM quarantine WHERE app = 'ledger' AND group = 'g'"

        def expire_window() -> None:  # another group's inserts push the batch's token out of the window
            for n in range(3):
                other = BatchIdentity("ledger", "h", 100 + n)
                rows = _quarantine_rows(100 + n, [f"other-{n}"]).set_column(1, "group", pa.array(["h"]))
                client.insert(QUARANTINE, rows, other.token(QUARANTINE))
                client.insert(COUNTS, _counts_row(100 + n, "h"), other.token(COUNTS))

        # tokens alone: a replay after the window expired counts twice (what the ledger prevents)
        raw = BatchIdentity("ledger", "raw", 1)
        raw_rows = _quarantine_rows(1, ["r1"]).set_column(1, "group", pa.array(["raw"]))
        client.insert(QUARANTINE, raw_rows, raw.token(QUARANTINE))
        expire_window()
        client.insert(QUARANTINE, raw_rows, raw.token(QUARANTINE))
        assert client.rows("SELECT count() FROM quarantine WHERE group = 'raw'") == [(2,)]

        # batch 5 committed (data, then progress); the process dies; the window expires; batch 5 replays
        ledger = ClickHouseLedger(lambda: client, "ledger", "g")
        five = BatchIdentity("ledger", "g", 5)
        assert ledger.begin(5) is True
        ledger.insert(QUARANTINE, _quarantine_rows(5, ["a", "b"]), five)
        ledger.commit(five, _progress_row(5))
        expire_window()
        restarted = ClickHouseLedger(lambda: client, "ledger", "g")
        assert restarted.begin(5) is False
        assert restarted.committed == 5
        assert client.rows(count) == [(2,)]

        # batch 6 cut short after its quarantine and counts inserts (no progress); a long outage;
        # batch 6 replays: the marked quarantine is skipped, the counts (no mark) are written again
        six = BatchIdentity("ledger", "g", 6)
        assert restarted.begin(6) is True
        restarted.insert(QUARANTINE, _quarantine_rows(6, ["c"]), six)
        restarted.insert(COUNTS, _counts_row(6), six)
        marks = "SELECT `table` FROM stream_sink_marks WHERE app = 'ledger' AND batch_id = 6"
        assert client.rows(marks) == []  # the quarantine answers for its own batches: no mark
        expire_window()
        again = ClickHouseLedger(lambda: client, "ledger", "g")
        assert again.begin(6) is True  # not committed: the batch runs, but skips what it wrote
        assert again.insert(QUARANTINE, _quarantine_rows(6, ["c"]), six) == 0
        assert again.insert(COUNTS, _counts_row(6), six) == 1  # sent again (its token left the window)
        again.commit(six, _progress_row(6))
        assert client.rows(count) == [(3,)]
        six_counts = "SELECT rows_in, bad FROM stream_counts FINAL WHERE app = 'ledger' AND batch_id = 6"
        assert client.rows(six_counts) == [(2, 2)]  # the replay's row folds into the first
        assert again.begin(7) is True  # the next batch is written normally
        assert again.insert(QUARANTINE, _quarantine_rows(7, ["d"]), BatchIdentity("ledger", "g", 7)) == 1
        assert client.rows(count) == [(4,)]
    finally:
        client.command(f"DROP DATABASE IF EXISTS `{database}`")
        client.close()


def _late_rows(batch: int, ids: list[str], group: str = "g") -> pa.Table:
    # event times with a microsecond: the table keeps milliseconds, 13:00:00.000, below the rows' own
    return pa.Table.from_pylist(
        [
            {"app": "ledger", "group": group, "batch_id": batch, "topic": f"persistent://t/n/{m[0]}",
             "message_id": m, "publish_time": dt.datetime(2024, 5, 1, 15, tzinfo=dt.UTC),
             "event_time": dt.datetime(2024, 5, 1, 13, 0, 0, 1, tzinfo=dt.UTC), "key": "k",
             "payload": b"{}", "payload_bytes": 2}
            for m in ids
        ],
        schema=LATE_SHAPE.arrow_schema(),
    )  # fmt: skip


def test_the_quarantine_and_late_tables_answer_for_the_batch_a_crash_cut_short(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The first batch of a run that is not committed may have been cut short: its quarantine and late
    rows are skipped where the table already holds all of them (the same app, group and batch id,
    among the replayed rows' topics and time range), sent again where it holds none or only some. The
    run's later batches ask nothing. Each replay below comes after the deduplication window expired,
    so only the table's own answer keeps the counts exact."""
    from tests.conftest import settings_for
    from widehouse.clickhouse.client import ClickHouse

    database = f"traced_{uuid.uuid4().hex[:8]}"
    client = clickhouse.connect(settings_for(tmp_path, WIDEHOUSE_CLICKHOUSE_DATABASE=database).clickhouse)
    asked: list[str] = []
    rows_of = ClickHouse.rows

    def rows(self: ClickHouse, sql: str, *args: Any, **kwargs: Any) -> list[tuple[Any, ...]]:
        if sql.startswith("SELECT count() FROM") and "topic IN" in sql:
            asked.append(sql.split()[3])
        return rows_of(self, sql, *args, **kwargs)

    monkeypatch.setattr(ClickHouse, "rows", rows)
    caplog.set_level(logging.INFO, logger="widehouse.stream")
    try:
        ensure_clickhouse(client, load_catalog(settings_for(tmp_path).schemas_dir))
        for table in (QUARANTINE, LATE):
            client.command(f"ALTER TABLE {table} MODIFY SETTING non_replicated_deduplication_window = 1")

        def expire_window(n: int) -> None:
            # another app's inserts push the tokens out of the window; its late row has batch 4's id,
            # topic and time: not this app's
            for table, data in ((QUARANTINE, _quarantine_rows(4, ["z"])), (LATE, _late_rows(4, ["c1"]))):
                other = data.set_column(0, "app", pa.array(["other"] * data.num_rows))
                client.insert(table, other, f"other:{n}:{table}")

        late = "SELECT count() FROM late_events WHERE app = 'ledger' AND `group` = 'g'"
        quarantined = "SELECT count() FROM quarantine WHERE app = 'ledger' AND `group` = 'g'"
        # batch 3: both tables written, then a crash before the progress rows (no marks made)
        first = ClickHouseLedger(lambda: client, "ledger", "g")
        three = BatchIdentity("ledger", "g", 3)
        assert first.begin(3) is True
        writes = [(QUARANTINE, _quarantine_rows(3, ["a", "b"])), (LATE, _late_rows(3, ["a1", "b1"]))]
        assert first.insert_all(writes, three) == 4
        assert client.rows("SELECT count() FROM stream_sink_marks") == [(0,)]
        expire_window(1)
        asked.clear()
        again = ClickHouseLedger(lambda: client, "ledger", "g")
        assert again.begin(3) is True
        assert again.insert_all(writes, three) == 0
        assert sorted(asked) == [LATE, QUARANTINE]
        assert "late_events already holds its 2 rows" in caplog.text
        assert client.rows(late) == [(2,)]
        assert client.rows(quarantined) == [(2,)]
        again.commit(three, _progress_row(3))

        # batch 4 cut short: the late table holds one of its two rows (as a large insert cut between
        # its blocks would), the quarantine none; another group's row of batch 4 is not this group's
        client.insert(LATE, _late_rows(4, ["c1"]), "partly")
        client.insert(LATE, _late_rows(4, ["c1"], group="h"), "h:4:late")
        expire_window(2)
        asked.clear()
        third = ClickHouseLedger(lambda: client, "ledger", "g")
        four = BatchIdentity("ledger", "g", 4)
        assert third.begin(4) is True
        sent = third.insert_all(
            [(QUARANTINE, _quarantine_rows(4, ["c"])), (LATE, _late_rows(4, ["c1", "d1"]))], four
        )
        assert sent == 3
        assert "late_events holds 1 of its 2 rows" in caplog.text
        assert client.rows(quarantined) == [(3,)]
        third.commit(four, _progress_row(4))

        # the run's next batch is not suspect: nothing is asked
        asked.clear()
        assert third.begin(5) is True
        assert (
            third.insert_all(
                [(QUARANTINE, _quarantine_rows(5, ["e"])), (LATE, _late_rows(5, ["e1"]))],
                BatchIdentity("ledger", "g", 5),
            )
            == 2
        )
        assert asked == []
        assert client.rows("SELECT count() FROM stream_sink_marks") == [(0,)]
    finally:
        client.command(f"DROP DATABASE IF EXISTS `{database}`")
        client.close()


def test_a_batchs_tables_are_written_side_by_side_then_marked_in_one_insert(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``insert_all`` writes several tables at once, each on a connection of its own, then marks them
    all in one insert. One table's failure is raised after the others ended and were marked; the
    replay writes that table only."""
    import threading

    from tests.conftest import settings_for
    from widehouse.clickhouse.client import ClickHouse

    database = f"lanes_{uuid.uuid4().hex[:8]}"
    client = clickhouse.connect(settings_for(tmp_path, WIDEHOUSE_CLICKHOUSE_DATABASE=database).clickhouse)
    writers: list[tuple[str, int]] = []
    insert = ClickHouse.insert

    marks: list[int] = []  # rows per insert of marks

    def recorded(self: ClickHouse, table: str, data: pa.Table, token: str, **options: bool) -> int:
        if table == "stream_sink_marks":
            marks.append(data.num_rows)
        else:
            writers.append((threading.current_thread().name, id(self)))
        return insert(self, table, data, token, **options)

    monkeypatch.setattr(ClickHouse, "insert", recorded)
    ledger = again = None
    try:
        ensure_clickhouse(client, load_catalog(settings_for(tmp_path).schemas_dir))
        for name in ("t1", "t2", "t3"):
            client.command(f"CREATE TABLE {name} (k UInt64) ENGINE = MergeTree ORDER BY k")

        def rows(n: int) -> pa.Table:
            return pa.table({"k": pa.array(range(n), pa.uint64())})

        writes = [("t1", rows(3)), ("t2", rows(2)), ("later", rows(4)), ("t3", rows(1)), ("t4", rows(0))]
        batch = BatchIdentity("lanes", "g", 1)
        ledger = ClickHouseLedger(lambda: client, "lanes", "g")
        ledger.open_lanes()  # as a run's first batch does while it reads
        opened = {id(lane) for lane in ledger._siblings}
        assert len(opened) == ledger.lanes
        first: list[str] = []
        assert ledger.begin(1) is True
        with pytest.raises(Exception, match="later"):  # the table does not exist yet
            ledger.insert_all(
                writes, batch, after_first=lambda: first.append(threading.current_thread().name)
            )
        assert len(first) == 1
        assert len({thread for thread, _ in writers}) > 1  # side by side
        assert id(client) not in {conn for _, conn in writers}  # on connections of their own
        assert {conn for _, conn in writers} <= opened  # the ones opened ahead
        counts = "SELECT (SELECT count() FROM t1), (SELECT count() FROM t2), (SELECT count() FROM t3)"
        assert client.rows(counts) == [(3, 2, 1)]
        marked = "SELECT `table` FROM stream_sink_marks WHERE app = 'lanes' AND batch_id = 1 ORDER BY `table`"
        assert client.rows(marked) == [("t1",), ("t2",), ("t3",)]
        assert marks == [3]  # one insert marks every table written, once their inserts ended

        client.command("CREATE TABLE later (k UInt64) ENGINE = MergeTree ORDER BY k")
        again = ClickHouseLedger(lambda: client, "lanes", "g")  # the restarted query's
        assert again.begin(1) is True
        assert again.insert_all(writes, batch) == 4  # only the table the batch did not reach
        assert client.rows(counts) == [(3, 2, 1)]
        assert client.rows("SELECT count() FROM later") == [(4,)]
        assert [t for (t,) in client.rows(marked)] == ["later", "t1", "t2", "t3"]
        assert marks == [3, 1]
    finally:
        for ledger_ in (ledger, again):
            if ledger_ is not None:
                ledger_.close()
        client.command(f"DROP DATABASE IF EXISTS `{database}`")
        client.close()


def test_the_sinks_inserts_skip_the_merge_on_insert_and_readers_still_fold(tmp_path: Path) -> None:
    """The ledger sends every insert of a batch (rows, marks, counts, progress) with
    ``optimize_on_insert=0`` (the rows are already one per sorting key), other inserts keep the
    default, and the analysts' views fold the partial rows themselves: a block that holds one key
    twice (which the driver never sends) still reads as their sum. Each table gets a column whose
    DEFAULT is ``getSetting('optimize_on_insert')``, evaluated in the insert's own context."""
    from tests.conftest import settings_for
    from widehouse.contracts.tables import MARKS, PROGRESS

    database = f"fold_{uuid.uuid4().hex[:8]}"
    client = clickhouse.connect(settings_for(tmp_path, WIDEHOUSE_CLICKHOUSE_DATABASE=database).clickhouse)
    ledger = None
    try:
        ensure_clickhouse(client, load_catalog(settings_for(tmp_path).schemas_dir))
        partial = "user_hourly_partial"
        seen = "seen String DEFAULT toString(getSetting('optimize_on_insert'))"
        for table in (partial, COUNTS, MARKS, PROGRESS):
            client.command(f"ALTER TABLE {table} ADD COLUMN {seen}")
        hour = dt.datetime(2024, 5, 1, 13, tzinfo=dt.UTC)

        def logins(uid: int, *counts: int) -> pa.Table:
            return pa.table(
                {
                    "uid": pa.array([uid] * len(counts), pa.int64()),
                    "hour": pa.array([hour] * len(counts), pa.timestamp("s", "UTC")),
                    "logins": pa.array(counts, pa.uint64()),
                }
            )

        batch = BatchIdentity("fold", "g", 1)
        ledger = ClickHouseLedger(lambda: client, "fold", "g")
        assert ledger.begin(1) is True
        ledger.insert_all([(partial, logins(7, 2, 3)), (COUNTS, _counts_row(1))], batch)
        ledger.commit(batch, _progress_row(1))
        client.insert(partial, logins(8, 4, 5), "not-the-ledger")  # any other caller: the default
        for table in (COUNTS, MARKS, PROGRESS):
            assert client.rows(f"SELECT DISTINCT seen FROM {table}") == [("false",)], table
        by_uid = f"SELECT uid, seen, count() FROM {partial} GROUP BY uid, seen ORDER BY uid"
        assert client.rows(by_uid) == [(7, "false", 2), (8, "true", 1)]  # not folded on insert / folded
        merged = "SELECT uid, logins FROM user_hourly_merged ORDER BY uid"
        assert client.rows(merged) == [(7, 5), (8, 9)]
    finally:
        if ledger is not None:
            ledger.close()
        client.command(f"DROP DATABASE IF EXISTS `{database}`")
        client.close()

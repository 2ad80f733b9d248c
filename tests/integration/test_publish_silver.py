"""The publish's ClickHouse-side staging and its delta-rs silver writer, with hand-written rows.

No Spark: the hour's final rows are computed by ClickHouse into ``<T>_final`` (``INSERT ...
SELECT`` from hand-written partial rows), read back in pages of two rows (so a period spans several
pages) and committed to silver Delta by delta-rs. What is proven:

- both stores hold exactly the hand-written final rows, every page read once;
- the silver commit is idempotent per publication (``txnAppId``/``txnVersion`` as delta-rs
  ``Transaction``): a replay and an older publication write nothing, a newer one replaces only its
  own period, and a column the catalog gained is added to the table.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests.conftest import settings_for
from widehouse import clickhouse
from widehouse.batch import ledger
from widehouse.batch import publish as publishing
from widehouse.batch.final_rows import final_hour_select
from widehouse.batch.publish import RunInfo, conform, publication_version, publish
from widehouse.batch.silver import DeltaRsSilver, silver_path, txn_app_id
from widehouse.batch.spark import DeltaSilver
from widehouse.catalog import WideTable, load_catalog
from widehouse.clickhouse import ClickHouse
from widehouse.settings import Settings
from widehouse.stream.tables import ensure_clickhouse

pytestmark = [pytest.mark.integration]

HOUR = dt.datetime(2026, 11, 22, 9, tzinfo=dt.UTC)
OTHER = HOUR + dt.timedelta(hours=1)
# (uid, logins, session_ms) partial rows; two micro-batches for some users
PARTIALS = [(7, 1, 100), (7, 2, 50), (3, 1, None), (11, 4, 10), (5, 0, 5), (5, 3, 5), (2, 1, 1)]
# the same, merged by hand: logins summed (count), session_ms summed (sum; null when never set)
FINAL = {2: (1, 1), 3: (1, None), 5: (3, 10), 7: (3, 150), 11: (4, 10)}


@pytest.fixture
def scratch(services: Settings, tmp_path: Path) -> Iterator[Settings]:
    settings = settings_for(
        services.state_dir,
        WIDEHOUSE_CLICKHOUSE_DATABASE=f"it_silver_{uuid.uuid4().hex[:8]}",
        WIDEHOUSE_DELTA_ROOT=str(tmp_path / "delta"),
    )
    client = clickhouse.connect(settings.clickhouse)
    yield settings
    client.command(f"DROP DATABASE IF EXISTS `{client.database}`")
    client.close()


@contextlib.contextmanager
def _hourly_stores(settings: Settings) -> Iterator[tuple[WideTable, ClickHouse]]:
    """``user_hourly`` and a client of the scratch database, its tables and the ledger created."""
    catalog = load_catalog(settings.schemas_dir)
    client = clickhouse.connect(settings.clickhouse)
    try:
        ensure_clickhouse(client, catalog)
        ledger.ensure(client)
        yield catalog.table("user_hourly"), client
    finally:
        client.close()


def _silver(settings: Settings, hour: dt.datetime) -> dict[int, tuple[Any, ...]]:
    """The hour's silver rows by uid (delta-rs); each uid once."""
    import deltalake

    rows = deltalake.DeltaTable(silver_path(settings.delta, "user_hourly")).to_pyarrow_table().to_pylist()
    hour_rows = [r for r in rows if r["hour"] == hour]
    by_uid = {r["uid"]: (r["logins"], r["session_ms"], r["finalized_at"]) for r in hour_rows}
    assert len(by_uid) == len(hour_rows), sorted(r["uid"] for r in hour_rows)
    return by_uid


def test_final_rows_computed_in_clickhouse_reach_both_stores_page_by_page(
    scratch: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(publishing, "PAGE_ROWS", 2)  # 5 users: pages of 2, 2, 1
    with _hourly_stores(scratch) as (table, client):
        for uid, logins, session in PARTIALS:
            value = "NULL" if session is None else str(session)
            client.command(
                "INSERT INTO user_hourly_partial (uid, hour, logins, session_ms) VALUES "
                f"({uid}, toDateTime('2026-11-22 09:00:00', 'UTC'), {logins}, {value})"
            )
        silver = DeltaSilver(None, scratch.delta)  # delta-rs only: never starts Spark
        run = RunInfo(run_id="it-silver", kind="hour")
        first = publish(client, silver, table, HOUR, final_hour_select(table, HOUR), run)
        assert first.rows == len(FINAL)
        staged = client.rows(
            "SELECT uid, logins, session_ms FROM user_hourly_final WHERE finalized_at = "
            "{f:DateTime64(3, 'UTC')} ORDER BY uid",
            {"f": first.finalized_at.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]},
        )
        assert {uid: (logins, session) for uid, logins, session in staged} == FINAL
        version = first.finalized_at.replace(microsecond=first.finalized_at.microsecond // 1000 * 1000)
        assert _silver(scratch, HOUR) == {uid: (*want, version) for uid, want in FINAL.items()}

        second = publish(client, silver, table, HOUR, final_hour_select(table, HOUR), run)
        rows = _silver(scratch, HOUR)
        assert {uid: r[:2] for uid, r in rows.items()} == FINAL  # replaced, not appended
        assert {r[2] for r in rows.values()} == {
            second.finalized_at.replace(microsecond=second.finalized_at.microsecond // 1000 * 1000)
        }
        writer = DeltaRsSilver(scratch.delta)
        assert writer.recorded("user_hourly", HOUR) == publication_version(second.finalized_at)


class _CrashError(Exception):
    """Stands for a publisher killed right after it prepared its publication."""


def test_the_airflow_run_reaches_the_ledger_also_when_a_later_run_rolls_the_publication_forward(
    scratch: Settings,
) -> None:
    airflow_run = "widehouse_refinalize/manual__2026-11-22T10:00:00+00:00"
    with _hourly_stores(scratch) as (table, client):
        silver = DeltaSilver(None, scratch.delta)

        def crash(point: str) -> None:
            if point == "after-prepare":
                raise _CrashError(point)

        run = RunInfo(run_id="it-crashed", kind="hour", airflow_run=airflow_run)
        with pytest.raises(_CrashError):
            publish(client, silver, table, HOUR, _rows(table, HOUR, [1, 2], 1, HOUR), run, step=crash)
        assert client.rows("SELECT run_id, airflow_run FROM publications") == [("it-crashed", airflow_run)]
        assert client.rows("SELECT count() FROM finalized_periods") == [(0,)]
        recovered = publishing.recover(client, silver, table, HOUR)  # the next run of the hour
        assert recovered is not None and recovered.rows == 2
        # then a publish outside Airflow (a shell): '' in its row
        publish(client, silver, table, OTHER, _rows(table, OTHER, [1], 1, OTHER), RunInfo("it-shell", "hour"))
        got = client.rows("SELECT period, run_id, airflow_run FROM finalized_periods ORDER BY period")
        assert [(r[1], r[2]) for r in got] == [("it-crashed", airflow_run), ("it-shell", "")]


def _rows(
    table: Any, hour: dt.datetime, uids: list[int], logins: int, at: dt.datetime
) -> pa.RecordBatchReader:
    counts = {c.name: [logins] * len(uids) for c in table.columns if c.agg == "count"}
    data = pa.table(
        {"uid": uids, "hour": pa.array([hour] * len(uids), pa.timestamp("us", tz="UTC")), **counts}
    )
    return pa.RecordBatchReader.from_batches(*_batches(conform(data, table, at)))


def _batches(data: pa.Table) -> tuple[pa.Schema, list[pa.RecordBatch]]:
    return data.schema, data.to_batches()


def test_silver_commits_are_idempotent_per_publication_and_touch_only_their_period(
    tmp_path: Path, services: Settings
) -> None:
    catalog = load_catalog(services.schemas_dir)
    table = catalog.table("user_hourly")
    delta = dataclasses.replace(services.delta, root=str(tmp_path / "delta"))
    writer = DeltaRsSilver(delta)
    at = dt.datetime(2026, 11, 22, 11, tzinfo=dt.UTC)

    def logins(hour: dt.datetime) -> dict[int, int]:
        import deltalake

        rows = deltalake.DeltaTable(silver_path(delta, "user_hourly")).to_pyarrow_table().to_pylist()
        return {r["uid"]: r["logins"] for r in rows if r["hour"] == hour}

    assert writer.replace(table, HOUR, _rows(table, HOUR, [1, 2, 3], 5, at), 100).created
    assert writer.replace(table, OTHER, _rows(table, OTHER, [1, 9], 7, at), 100).written
    replay = writer.replace(table, HOUR, _rows(table, HOUR, [1, 2, 3, 4], 6, at), 100)
    older = writer.replace(table, HOUR, _rows(table, HOUR, [8], 1, at), 99)
    assert not replay.written and not older.written
    assert logins(HOUR) == {1: 5, 2: 5, 3: 5} and logins(OTHER) == {1: 7, 9: 7}

    newer = writer.replace(table, HOUR, _rows(table, HOUR, [2, 4], 8, at), 101)
    assert newer.written and newer.rows == 2 and not newer.created
    assert logins(HOUR) == {2: 8, 4: 8} and logins(OTHER) == {1: 7, 9: 7}
    assert writer.recorded("user_hourly", HOUR) == 101 and writer.recorded("user_hourly", OTHER) == 100

    # a column the catalog gained: added by the commit, null in the periods written before
    grown = dataclasses.replace(
        table, columns=(*table.columns, dataclasses.replace(table.column("logins"), name="logins_again"))
    )
    assert writer.replace(grown, HOUR, _rows(grown, HOUR, [2], 1, at), 102).written
    import deltalake

    rows = deltalake.DeltaTable(silver_path(delta, "user_hourly")).to_pyarrow_table().to_pylist()
    assert {(r["uid"], r["logins_again"]) for r in rows if r["hour"] == HOUR} == {(2, 1)}
    assert {(r["uid"], r["logins_again"]) for r in rows if r["hour"] == OTHER} == {(1, None), (9, None)}
    assert txn_app_id("user_hourly", HOUR) == "widehouse-publish:user_hourly:2026-11-22T09:00Z"


def test_arrow_rows_streamed_in_batches_are_staged_and_published(scratch: Settings) -> None:
    """The daily merge's path (rows from HBase, not from ClickHouse): a stream of record batches,
    each batch its own idempotent insert, in both stores as given."""
    with _hourly_stores(scratch) as (table, client):
        hours = pa.array([OTHER] * 3, pa.timestamp("us", tz="UTC"))
        data = pa.table({"uid": [4, 1, 9], "hour": hours, "logins": pa.array([2, 3, 4], pa.uint64())})
        batches = [data.slice(0, 2).to_batches()[0], data.slice(2).to_batches()[0]]
        reader = pa.RecordBatchReader.from_batches(data.schema, batches)
        result = publish(
            client, DeltaSilver(None, scratch.delta), table, OTHER, reader, RunInfo("it-arrow", "hour")
        )
        assert result.rows == 3
        staged = client.rows(
            "SELECT uid, logins, session_ms FROM user_hourly_final ORDER BY uid",
        )
        assert staged == [(1, 3, None), (4, 2, None), (9, 4, None)]
        rows = _silver(scratch, OTHER)
        assert {uid: r[:2] for uid, r in rows.items()} == {1: (3, None), 4: (2, None), 9: (4, None)}

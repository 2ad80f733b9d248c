"""The generated ClickHouse DDL in the real engine: create, merge partial rows, dedupe, finalize, evolve."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests.support import copy_catalog
from widehouse import clickhouse
from widehouse.catalog import Catalog, load_catalog
from widehouse.clickhouse import ddl
from widehouse.errors import CatalogError
from widehouse.settings import Settings

pytestmark = [pytest.mark.integration, pytest.mark.clickhouse]


@pytest.fixture(autouse=True)
def _clickhouse_running(services: Settings) -> None:
    """These tests use the session's ClickHouse (the local service, started with the others)."""


ROOT = Path(__file__).parents[2]
HOUR = 1_778_400_000_000  # 2026-05-10T08:00:00Z
TS = pa.timestamp("ms", tz="UTC")


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog(ROOT / "schemas")


@pytest.fixture
def db(settings: Settings, catalog: Catalog) -> Iterator[tuple[Any, str]]:
    client = clickhouse.connect(settings.clickhouse)
    name = f"wh_it_{uuid.uuid4().hex[:8]}"
    ddl.apply_ddl(client, catalog, name)
    yield client, name
    client.command(f"DROP DATABASE IF EXISTS `{name}`")


def pair(ts: int | None, value: Any, value_type: pa.DataType) -> pa.Array:
    kind = pa.struct([("ts", TS), ("v", value_type)])
    return pa.array([None if ts is None else {"ts": ts, "v": value}], kind)


def partial(uid: int, hour: int, **columns: pa.Array) -> pa.Table:
    return pa.table({"uid": pa.array([uid], pa.int64()), "hour": pa.array([hour], TS), **columns})


def merged(client: Any, db: str, view: str, uid: int) -> dict[str, Any]:
    result = client.query(f"SELECT * FROM `{db}`.`{view}` WHERE uid = {uid}")
    assert len(result.result_rows) == 1, result.result_rows
    return dict(zip(result.column_names, result.result_rows[0], strict=True))


def test_objects_exist_and_apply_is_idempotent(db: tuple[Any, str], catalog: Catalog) -> None:
    client, name = db
    tables = {
        r[0]: r[1]
        for r in client.query(f"SELECT name, engine FROM system.tables WHERE database = '{name}'").result_rows
    }
    assert tables == {
        "user_hourly_partial": "AggregatingMergeTree",
        "user_hourly_merged": "View",
        "user_hourly_final": "ReplacingMergeTree",
        "user_hourly": "View",
        "user_daily_partial": "AggregatingMergeTree",
        "user_daily_merged": "View",
        "user_daily_final": "ReplacingMergeTree",
        "user_daily": "View",
        "finalized_periods": "MergeTree",  # the ledger the analyst views read
    }
    again = ddl.apply_ddl(client, catalog, name)
    assert not [s for s in again if s.startswith("ALTER")]
    columns = client.query(
        f"SELECT count() FROM system.columns WHERE database = '{name}' AND table = 'user_daily_final'"
    )
    assert columns.result_rows[0][0] == 2 + 80 + 20 + 1


def test_two_partial_rows_merge_into_one_final_row(db: tuple[Any, str]) -> None:
    client, name = db
    first = partial(
        42,
        HOUR,
        logins=pa.array([2], pa.uint64()),
        page_dwell_ms=pa.array([100], pa.int64()),
        max_live_watch_ms=pa.array([10], pa.int64()),
        first_login_at=pa.array([HOUR + 500], TS),
        first_live_room=pair(HOUR + 1000, 7, pa.int64()),
        last_live_room=pair(HOUR + 1000, 7, pa.int64()),
        recharge_usd=pa.array([1.25], pa.float64()),
    )
    second = partial(
        42,
        HOUR,
        logins=pa.array([1], pa.uint64()),
        page_dwell_ms=pa.array([50], pa.int64()),
        max_live_watch_ms=pa.array([5], pa.int64()),
        first_login_at=pa.array([HOUR + 100], TS),
        first_live_room=pair(HOUR + 10, 9, pa.int64()),
        last_live_room=pair(HOUR + 2000, 3, pa.int64()),
        last_country=pair(None, None, pa.string()),  # an empty pair sent as null becomes the sentinel
        recharge_usd=pa.array([None], pa.float64()),
    )
    client.insert_arrow(
        f"`{name}`.user_hourly_partial", first, settings={"insert_deduplication_token": "g1-1"}
    )
    client.insert_arrow(
        f"`{name}`.user_hourly_partial", second, settings={"insert_deduplication_token": "g1-2"}
    )
    # a replayed batch (same token) changes nothing
    client.insert_arrow(
        f"`{name}`.user_hourly_partial", second, settings={"insert_deduplication_token": "g1-2"}
    )
    row = merged(client, name, "user_hourly_merged", 42)
    assert row["logins"] == 3 and row["page_dwell_ms"] == 150 and row["max_live_watch_ms"] == 10
    assert row["first_live_room"] == 9 and row["last_live_room"] == 3
    assert row["recharge_usd"] == 1.25
    assert int(row["first_login_at"].timestamp() * 1000) == HOUR + 100
    # untouched columns: counts 0, everything else null (sentinel pairs unwrapped to NULL)
    assert row["clicks"] == 0 and row["session_ms"] is None and row["last_country"] is None
    assert row["last_app_version"] is None
    assert client.query(f"SELECT count() FROM `{name}`.user_hourly_partial").result_rows[0][0] == 2


def test_daily_merge_spans_hours_and_the_analyst_view_joins_final_and_live(db: tuple[Any, str]) -> None:
    client, name = db
    for offset, count, room in ((0, 1, 5), (3_600_000, 4, 6)):
        client.insert_arrow(
            f"`{name}`.user_daily_partial",
            partial(
                7,
                HOUR + offset,
                logins=pa.array([count], pa.uint64()),
                last_live_room=pair(HOUR + offset + 1, room, pa.int64()),
            ),
        )
    day = merged(client, name, "user_daily_merged", 7)
    assert day["logins"] == 5 and day["last_live_room"] == 6 and str(day["day"]) == "2026-05-10"
    # a finalized earlier hour, and a live hour after it
    earlier = (HOUR - 3_600_000) // 1000
    client.command(
        f"INSERT INTO `{name}`.user_hourly_final (uid, hour, logins, finalized_at) "
        f"VALUES (8, toDateTime({earlier}, 'UTC'), 11, toDateTime64('2026-05-10 12:00:00', 3, 'UTC'))"
    )
    # not visible until the ledger names that version
    assert client.query(f"SELECT count() FROM `{name}`.user_hourly WHERE uid = 8").result_rows == [(0,)]
    client.command(
        f"INSERT INTO `{name}`.finalized_periods (`table`, period, finalized_at, run_id, kind, rows, forced, "
        f"include_late, late_rows, reconciliation, note) VALUES ('user_hourly', toDateTime64({earlier}, 3, "
        "'UTC'), toDateTime64('2026-05-10 12:00:00', 3, 'UTC'), 'r1', 'hour', 1, false, false, 0, 'ok', '')"
    )
    client.insert_arrow(f"`{name}`.user_hourly_partial", partial(8, HOUR, logins=pa.array([2], pa.uint64())))
    rows = client.query(
        f"SELECT toUnixTimestamp(hour), logins FROM `{name}`.user_hourly WHERE uid = 8 ORDER BY hour"
    )
    assert rows.result_rows == [((HOUR - 3_600_000) // 1000, 11), (HOUR // 1000, 2)]
    daily_view = client.query(f"SELECT logins, pay_orders FROM `{name}`.user_daily WHERE uid = 7").result_rows
    assert daily_view == [(5, None)]  # live day row: offline columns still null


def test_a_new_catalog_column_is_added_in_place(settings: Settings, tmp_path: Path) -> None:
    copy_catalog(tmp_path)
    client = clickhouse.connect(settings.clickhouse)
    name = f"wh_it_{uuid.uuid4().hex[:8]}"
    try:
        ddl.apply_ddl(client, load_catalog(tmp_path / "schemas"), name)
        client.insert_arrow(
            f"`{name}`.user_hourly_partial", partial(1, HOUR, logins=pa.array([1], pa.uint64()))
        )
        table = tmp_path / "schemas/tables/user_hourly.yaml"
        table.write_text(table.read_text() + "  - {name: max_crash_screen, description: new}\n")
        crash = tmp_path / "schemas/topics/bigolive/app/app_crash.yaml"
        crash.write_text(
            crash.read_text().replace(
                "    app_crashes: count\n", "    app_crashes: count\n    max_crash_screen: max(screen)\n", 1
            )
        )
        evolved = load_catalog(tmp_path / "schemas")
        statements = ddl.apply_ddl(client, evolved, name)
        assert [s for s in statements if s.startswith("ALTER")] == [
            f"ALTER TABLE `{name}`.`user_hourly_partial` ADD COLUMN IF NOT EXISTS `max_crash_screen` "
            "SimpleAggregateFunction(max, Nullable(String))",
            f"ALTER TABLE `{name}`.`user_hourly_final` ADD COLUMN IF NOT EXISTS `max_crash_screen` "
            "Nullable(String)",
        ]
        row = merged(client, name, "user_hourly_merged", 1)
        assert row["logins"] == 1 and row["max_crash_screen"] is None
        # changing an existing column's aggregate is refused, not silently migrated
        crash.write_text(
            crash.read_text().replace("max_crash_screen: max(screen)", "max_crash_screen: last(screen)")
        )
        with pytest.raises(CatalogError, match=r"max_crash_screen.*migrate it deliberately"):
            ddl.apply_ddl(client, load_catalog(tmp_path / "schemas"), name)
    finally:
        client.command(f"DROP DATABASE IF EXISTS `{name}`")

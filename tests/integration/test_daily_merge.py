"""The daily merge against real services: ClickHouse (the local service, a database per test),
HBase through Thrift (a table prefix per test), Spark with Hive (a database per module) and Delta.

Expected rows are the hand-written golden fixture (tests/golden/daily.yaml)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import settings_for
from tests.integration import daily_support as support
from widehouse import clickhouse, hbase
from widehouse.batch.daily import DailyRequest
from widehouse.batch.daily.spark import run_daily
from widehouse.batch.spark import DeltaSilver, silver_path
from widehouse.catalog import Catalog, load_catalog
from widehouse.errors import HBaseError, MissingInputError
from widehouse.hbase.keys import row_key
from widehouse.settings import Settings

pytestmark = [pytest.mark.integration, pytest.mark.spark]

GOLDEN = support.fixture()
DAY = dt.date.fromisoformat(GOLDEN["day"])
BUCKETS = 4


@pytest.fixture(scope="module")
def hive_db(spark: Any, settings: Settings) -> Iterator[str]:
    database = f"it_off_{uuid.uuid4().hex[:6]}"
    catalog = load_catalog(settings.schemas_dir)
    support.load_hive(spark, catalog.sql_dir, database, GOLDEN["hive"])
    yield database
    spark.sql(f"DROP DATABASE IF EXISTS `{database}` CASCADE")


class Deployment:
    """One test's ClickHouse database, HBase table prefix and Delta root, on the shared services."""

    def __init__(self, base: Settings, root: Path, **env: str) -> None:
        self.suffix = uuid.uuid4().hex[:6]
        self.settings = settings_for(
            base.state_dir,
            WIDEHOUSE_CLICKHOUSE_DATABASE=f"it_daily_{self.suffix}",
            WIDEHOUSE_HBASE_TABLE_PREFIX=f"it_{self.suffix}_",
            WIDEHOUSE_HBASE_SALT_BUCKETS=str(BUCKETS),
            WIDEHOUSE_DELTA_ROOT=str(root / "delta"),
            **env,
        )
        self.catalog: Catalog = load_catalog(self.settings.schemas_dir)
        self.client = clickhouse.connect(self.settings.clickhouse)

    def run(self, spark: Any, hive_db: str, **kwargs: Any) -> Any:
        rewrite = kwargs.pop("rewrite_stream", False)
        request = DailyRequest(day=kwargs.pop("day", DAY), offline_database=hive_db, rewrite_stream=rewrite)
        silver = DeltaSilver(spark, self.settings.delta)
        return run_daily(spark, self.settings, self.catalog, self.client, silver, request, **kwargs)

    def silver(self, spark: Any, day: dt.date) -> list[dict[str, Any]]:
        from delta.tables import DeltaTable

        path = silver_path(self.settings.delta, "user_daily")
        if not DeltaTable.isDeltaTable(spark, path):
            return []
        frame = spark.read.format("delta").load(path).where(f"day = date'{day.isoformat()}'")
        return support.normalise(frame.toArrow().to_pylist())

    def close(self, hbase_port: int | None = None) -> None:
        self.client.command(f"DROP DATABASE IF EXISTS `{self.client.database}`")
        self.client.close()
        settings = self.settings.hbase
        connection = hbase.connect(settings if hbase_port is None else _with_port(settings, hbase_port))
        for name in connection.tables():
            if name.decode().startswith(settings.table_prefix):
                connection.delete_table(name, disable=True)
        connection.close()


def _with_port(settings: Any, port: int) -> Any:
    import dataclasses

    return dataclasses.replace(settings, port=port)


@pytest.fixture
def deployment(services: Settings, tmp_path: Path) -> Iterator[Deployment]:
    deployment = Deployment(services, tmp_path)
    from widehouse.stream.tables import ensure_clickhouse

    ensure_clickhouse(deployment.client, deployment.catalog)
    support.insert_stream(deployment.client, GOLDEN["stream"])
    yield deployment
    deployment.close()


def test_golden_day_published_identically_twice(deployment: Deployment, spark: Any, hive_db: str) -> None:
    table = deployment.catalog.table("user_daily")
    expected = support.expected_rows(table, DAY, GOLDEN["expected"])

    first = deployment.run(spark, hive_db)
    assert first.published.rows == 5
    assert (first.stream.rows, first.offline.rows) == (3, 4)  # 3 stream users; 4 Hive users
    assert not first.stream.unchanged
    assert support.published(deployment.client, DAY) == expected
    assert deployment.silver(spark, DAY) == expected

    second = deployment.run(spark, hive_db)
    assert (second.stream.pruned, second.offline.pruned) == (0, 0)
    # the partials did not change: family s is left as the first run wrote it
    assert second.stream.unchanged and second.stream.rows == 3
    assert support.published(deployment.client, DAY) == expected
    assert deployment.silver(spark, DAY) == expected
    assert support.ledger_entries(deployment.client, DAY) == 2

    # the HBase rows, by hand: salted keys, one packed cell per family (typed text, null bits)
    stream = [c.name for c in table.columns]
    offline = [c.name for c in table.offline_columns]
    connection = hbase.connect(deployment.settings.hbase)
    try:
        day_table = connection.table(f"{deployment.settings.hbase.table_prefix}user_daily")
        assert row_key(10000001, DAY, BUCKETS) == b"3|20261122|10000001"  # crc32 2074459403 mod 4
        row = day_table.row(b"3|20261122|10000001")
        assert set(row) == {b"s:0", b"h:0"}  # a day row is two cells
        version, _, s_values = support.unpack_cell(row[b"s:0"])
        assert version == 1 and len(s_values) == len(stream)
        assert s_values[stream.index("logins")] == b"3"
        assert s_values[stream.index("first_login_at")] == b"1795338300250"  # 2026-11-22 09:05:00.250 UTC
        assert s_values[stream.index("last_search_query")] is None
        _, _, h_values = support.unpack_cell(row[b"h:0"])
        assert len(h_values) == len(offline)
        assert h_values[offline.index("is_anchor")] == b"true"
        assert h_values[offline.index("pay_refund_usd")] == b"0.99"
        # 5 day rows, then the refresh's marker (after every salt; no bucket's scan sees it)
        keys = [key for key, _ in day_table.scan()]
        assert len(keys) == 6 and keys[-1] == b"~refresh|20261122"
        assert b"|20261122|" not in keys[-1] and not keys[-1].startswith(b"3|")
    finally:
        connection.close()


def test_a_value_that_became_null_and_a_user_that_left_are_removed(
    deployment: Deployment, spark: Any, hive_db: str
) -> None:
    table = deployment.catalog.table("user_daily")
    deployment.run(spark, hive_db)
    # the stream's data for the day changes: 10000003 disappears, 10000002 loses its country
    deployment.client.command(
        "ALTER TABLE user_daily_partial DELETE WHERE uid IN (10000002, 10000003) SETTINGS mutations_sync = 1"
    )
    support.insert_stream(deployment.client, [{"uid": 10000002, "hour": "2026-11-22 10:00:00", "logins": 1}])
    again = deployment.run(spark, hive_db)
    assert again.stream.pruned == 1 and not again.stream.unchanged
    expected = support.expected_rows(table, DAY, GOLDEN["expected"])
    for row in expected:
        if row["uid"] == 10000002:
            row["last_country"] = None
    expected = [r for r in expected if r["uid"] != 10000003]
    assert support.published(deployment.client, DAY) == expected
    assert deployment.silver(spark, DAY) == expected


def test_a_missing_hive_partition_is_named_and_nothing_is_published(
    deployment: Deployment, spark: Any, hive_db: str
) -> None:
    day = dt.date(2026, 11, 23)
    with pytest.raises(MissingInputError, match=rf"{hive_db}\.payments partition dt=2026-11-23") as info:
        deployment.run(spark, hive_db, day=day)
    assert f"{hive_db}.user_profile partition dt=2026-11-23" in str(info.value)
    assert support.ledger_entries(deployment.client, day) == 0
    assert deployment.silver(spark, day) == []


def test_unreachable_hbase_is_named_and_nothing_is_published(
    services: Settings, tmp_path: Path, spark: Any, hive_db: str
) -> None:
    deployment = Deployment(services, tmp_path, WIDEHOUSE_HBASE_PORT="1", WIDEHOUSE_HBASE_TIMEOUT_MS="2000")
    try:
        with pytest.raises(HBaseError, match=r"HBase Thrift server at 127\.0\.0\.1:1"):
            deployment.run(spark, hive_db)
        assert support.ledger_entries(deployment.client, DAY) == 0
        assert deployment.silver(spark, DAY) == []
    finally:
        deployment.client.command(f"DROP DATABASE IF EXISTS `{deployment.client.database}`")
        deployment.client.close()


def test_thrift_killed_during_the_extract_fails_clearly_then_a_rerun_completes(
    services: Settings, tmp_path: Path, spark: Any, hive_db: str
) -> None:
    thrift = support.PrivateThrift(services.local, tmp_path / "thrift")
    thrift.start()
    deployment = Deployment(services, tmp_path, WIDEHOUSE_HBASE_PORT=str(thrift.port))
    try:
        from widehouse.stream.tables import ensure_clickhouse

        ensure_clickhouse(deployment.client, deployment.catalog)
        support.insert_stream(deployment.client, GOLDEN["stream"])

        def kill_at_extract(step: str) -> None:
            if step == "extract":
                thrift.kill()

        with pytest.raises(HBaseError, match=rf"extracting .* failed: .*127\.0\.0\.1:{thrift.port}"):
            deployment.run(spark, hive_db, step=kill_at_extract)
        assert support.ledger_entries(deployment.client, DAY) == 0
        assert deployment.silver(spark, DAY) == []
        live = support.published(deployment.client, DAY)  # the stream's live rows, no offline half
        assert [r["uid"] for r in live] == [10000001, 10000002, 10000003]
        assert all(r["country"] is None for r in live)

        thrift.start()
        deployment.run(spark, hive_db)
        expected = support.expected_rows(deployment.catalog.table("user_daily"), DAY, GOLDEN["expected"])
        assert support.published(deployment.client, DAY) == expected
        assert deployment.silver(spark, DAY) == expected
    finally:
        thrift.kill()
        deployment.close(hbase_port=services.hbase.port)


class _CrashError(Exception):
    """Stands for the process dying at a publish point (the lease is released by the exception
    path here; a SIGKILLed holder's lease is taken over, see test_publish_lease.py)."""


def test_a_day_prepared_then_crashed_is_rolled_forward_by_a_rerun_that_then_fails(
    deployment: Deployment, spark: Any, hive_db: str
) -> None:
    expected = support.expected_rows(deployment.catalog.table("user_daily"), DAY, GOLDEN["expected"])

    def crash_after_prepare(step: str) -> None:
        if step == "after-prepare":
            raise _CrashError(step)

    with pytest.raises(_CrashError):
        deployment.run(spark, hive_db, step=crash_after_prepare)
    assert support.ledger_entries(deployment.client, DAY) == 0  # decided, nothing visible yet
    assert deployment.silver(spark, DAY) == []
    assert support.published(deployment.client, DAY) != expected  # the live rows, no offline half

    # a re-run HBase stops before it writes anything still completes the decided publication first
    unreachable = _with_port(deployment.settings.hbase, 1)
    broken = dataclasses.replace(deployment.settings, hbase=dataclasses.replace(unreachable, timeout_ms=2000))
    silver = DeltaSilver(spark, broken.delta)
    request = DailyRequest(day=DAY, offline_database=hive_db)
    with pytest.raises(HBaseError, match=r"127\.0\.0\.1:1"):
        run_daily(spark, broken, deployment.catalog, deployment.client, silver, request)
    assert support.ledger_entries(deployment.client, DAY) == 1
    assert support.published(deployment.client, DAY) == expected
    assert deployment.silver(spark, DAY) == expected


def test_the_hourly_hbase_refresh_never_interleaves_with_the_daily_merge(
    deployment: Deployment, spark: Any, hive_db: str
) -> None:
    """Both take the (user_daily, day) lease: during the daily run the refresh is refused."""
    from widehouse.batch.lease import PeriodBusyError
    from widehouse.batch.spark import day_refresher

    refresh = day_refresher(deployment.settings, deployment.client, deployment.catalog, wait=0.2)
    refused: list[str] = []

    def refresh_during(step: str) -> None:
        if step in {"write-offline", "extract"}:
            try:
                refresh(DAY)
            except PeriodBusyError as exc:
                refused.append(str(exc))

    deployment.run(spark, hive_db, step=refresh_during)
    assert len(refused) == 2
    assert all("period 2026-11-22T00:00Z of user_daily is being published by run" in m for m in refused)
    assert refresh(DAY) == 3  # the daily run is over: the refresh runs (3 stream users)


def test_a_new_publication_is_newer_than_one_stamped_by_a_clock_ahead(
    deployment: Deployment, spark: Any, hive_db: str
) -> None:
    """A publication committed with a ``finalized_at`` an hour ahead (a skewed publisher's clock):
    the next one still gets a newer version, so the view and Delta show the new rows."""
    from widehouse.batch import ledger
    from widehouse.contracts.tables import LEDGER_SHAPE

    expected = support.expected_rows(deployment.catalog.table("user_daily"), DAY, GOLDEN["expected"])
    ledger.ensure(deployment.client)
    ahead = dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(hours=1)
    entry = {"table": "user_daily", "period": dt.datetime(2026, 11, 22, tzinfo=dt.UTC), "finalized_at": ahead}
    entry |= {"run_id": "skewed", "kind": "day", "rows": 0, "forced": False, "include_late": False}
    entry |= {"late_rows": 0, "reconciliation": "", "note": ""}
    ledger.record(deployment.client, [entry], LEDGER_SHAPE, "skewed-clock")
    assert support.published(deployment.client, DAY) == []  # that version has no rows

    outcome = deployment.run(spark, hive_db)
    assert outcome.published.finalized_at == ahead + dt.timedelta(milliseconds=1)
    assert support.published(deployment.client, DAY) == expected
    assert deployment.silver(spark, DAY) == expected


def test_the_partials_fingerprint_sees_inserts_mutations_drops_and_new_tables_not_merges(
    deployment: Deployment,
) -> None:
    """What decides whether a refresh of the day may be skipped, against the real ClickHouse."""
    from widehouse.hbase.daytable import day_table
    from widehouse.hbase.refresh import partials_fingerprint
    from widehouse.stream.tables import ensure_clickhouse

    client, table = deployment.client, deployment.catalog.table("user_daily")
    spec = day_table(table, deployment.settings.hbase)

    def fingerprint() -> str | None:
        return partials_fingerprint(client, table, DAY, spec)

    def parts() -> int:
        return int(
            client.scalar(
                "SELECT count() FROM system.parts WHERE database = currentDatabase() "
                "AND table = 'user_daily_partial' AND partition_id = '20261122' AND active"
            )
        )

    seen = [fingerprint()]
    assert seen[0] == fingerprint()  # stable
    support.insert_stream(client, [{"uid": 10000009, "hour": "2026-11-22 23:00:00", "logins": 1}])
    seen.append(fingerprint())
    assert parts() > 1
    client.command("OPTIMIZE TABLE user_daily_partial PARTITION 20261122 FINAL")
    assert parts() == 1  # a merge: same data, other parts
    assert fingerprint() == seen[-1]
    client.command("ALTER TABLE user_daily_partial DELETE WHERE uid = 10000009 SETTINGS mutations_sync = 1")
    seen.append(fingerprint())
    support.insert_stream(client, [{"uid": 10000009, "hour": "2026-11-23 01:00:00", "logins": 1}])
    assert fingerprint() == seen[-1]  # another day's partition
    client.command("ALTER TABLE user_daily_partial DROP PARTITION 20261122")
    seen.append(fingerprint())
    client.command("DROP TABLE user_daily_partial SYNC")
    ensure_clickhouse(client, deployment.catalog)
    support.insert_stream(client, GOLDEN["stream"])
    seen.append(fingerprint())  # the same rows as at first, in a new table
    assert len(set(seen)) == len(seen) == 5
    other = dataclasses.replace(spec, buckets=BUCKETS * 2)
    assert partials_fingerprint(client, table, DAY, other) != seen[-1]  # another layout


def test_the_hourly_refresh_marks_the_day_a_crashed_one_leaves_no_mark_and_rewrite_writes(
    deployment: Deployment, spark: Any, hive_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from widehouse.batch import lease
    from widehouse.batch.spark import day_refresher
    from widehouse.hbase import refresh as refresh_module
    from widehouse.hbase.refresh import read_marker

    lease.ensure(deployment.client)  # as the finalize that runs the refresh has
    refresh = day_refresher(deployment.settings, deployment.client, deployment.catalog)
    assert refresh(DAY) == 3  # the hourly finalize's refresh writes the day (3 stream users)
    outcome = deployment.run(spark, hive_db)
    assert outcome.stream.unchanged and outcome.stream.rows == 3  # the daily merge writes nothing there
    assert "family s unchanged since the last refresh (3 stream row(s), nothing written)" in outcome.summary()
    forced = deployment.run(spark, hive_db, rewrite_stream=True)
    assert not forced.stream.unchanged and forced.stream.rows == 3

    # new stream data, then a refresh that dies while writing: it has already taken the mark away
    support.insert_stream(deployment.client, [{"uid": 10000009, "hour": "2026-11-22 23:00:00", "logins": 2}])

    def dies(*_args: Any) -> Any:
        raise OSError("killed while writing buckets")

    monkeypatch.setattr(refresh_module, "_refresh_all", dies)
    with pytest.raises(HBaseError, match="failed while writing family s of"):
        refresh(DAY)
    monkeypatch.undo()
    connection = hbase.connect(deployment.settings.hbase)
    try:
        day_table = connection.table(f"{deployment.settings.hbase.table_prefix}user_daily")
        assert read_marker(day_table, DAY) is None
    finally:
        connection.close()
    again = deployment.run(spark, hive_db)
    assert not again.stream.unchanged and again.stream.rows == 4
    published = {row["uid"]: row for row in support.published(deployment.client, DAY)}
    assert published[10000009]["logins"] == 2

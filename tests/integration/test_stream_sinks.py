"""The stream's ClickHouse side: tables created or migrated, inserts idempotent per batch (real engine)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from widehouse import clickhouse
from widehouse.catalog import load_catalog
from widehouse.settings import Settings
from widehouse.stream.progress import BatchIdentity
from widehouse.stream.tables import QUARANTINE, QUARANTINE_SHAPE, ensure_clickhouse

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

    rows = pa.table(
        {
            "app": ["a", "a"], "group": ["g", "g"], "batch_id": pa.array([5, 5], pa.int64()),
            "topic": ["persistent://t/n/x", "persistent://t/n/x"], "message_id": ["1:1:0", "1:2:0"],
            "publish_time": pa.array([1_700_000_000_000_000] * 2, pa.timestamp("us", tz="UTC")),
            "reason": ["malformed_json", "empty_payload"], "detail": ["", ""],
            "payload": pa.array([b"{x", b""], pa.binary()), "payload_bytes": pa.array([2, 0], pa.int64()),
        }
    ).cast(QUARANTINE_SHAPE.arrow_schema())  # fmt: skip
    batch = BatchIdentity("dedup-test", "g", 5)
    assert client.insert(QUARANTINE, rows, batch.token(QUARANTINE)) == 2
    client.insert(QUARANTINE, rows, batch.token(QUARANTINE))  # the same batch replayed after a crash
    count = "SELECT count() FROM quarantine WHERE app = 'a' AND batch_id = 5"
    assert client.query(count).result_rows == [(2,)]
    client.insert(QUARANTINE, rows, BatchIdentity("dedup-test", "g", 6).token(QUARANTINE))  # new data
    assert client.query(count).result_rows == [(4,)]

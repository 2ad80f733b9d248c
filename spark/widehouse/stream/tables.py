"""The streaming job's side tables (quarantine, late events, progress) and where every table lives.

Wide tables are described by the catalog (:mod:`widehouse.clickhouse.ddl` for ClickHouse,
:mod:`widehouse.catalog.schema` for Delta); this module adds the three tables every slot group also
writes, and the Delta paths of all of them:

==================  ================================  ===========================================
what                ClickHouse (database ``wh``)      Delta (under WIDEHOUSE_DELTA_ROOT)
==================  ================================  ===========================================
partial wide rows   ``<table>_partial``               ``bronze/<table>_partials`` (by date, hour)
quarantine          ``quarantine``                    ``bronze/quarantine`` (by publish date)
late events         ``late_events``                   ``bronze/late_events`` (by publish date)
progress            ``stream_progress``               ``bronze/stream_progress`` (by date)
==================  ================================  ===========================================

Every table carries the app, group and batch id of the micro-batch that wrote it, so a row can be
traced to its batch, and replays are recognisable.
"""

from __future__ import annotations

from typing import Any

from widehouse.catalog import Catalog
from widehouse.clickhouse.ddl import DEDUP_WINDOW, apply_ddl, q
from widehouse.settings import DeltaSettings

QUARANTINE = "quarantine"
LATE = "late_events"
PROGRESS = "stream_progress"
GROUP_ROW = "*"
"""The ``topic`` of a progress row that describes the whole group (totals and the watermark)."""


def side_table_ddl(database: str, dedup_window: int = DEDUP_WINDOW) -> list[str]:
    """ClickHouse DDL of the quarantine, late-event and progress tables (idempotent)."""
    db = q(database)
    settings = f"SETTINGS non_replicated_deduplication_window = {dedup_window}"
    return [
        f"""CREATE TABLE IF NOT EXISTS {db}.{q(QUARANTINE)}
(
    `app` LowCardinality(String),
    `group` LowCardinality(String),
    `batch_id` UInt64,
    `topic` LowCardinality(String),
    `message_id` String,
    `publish_time` DateTime64(3, 'UTC'),
    `reason` LowCardinality(String),
    `detail` String,
    `payload` String,
    `payload_bytes` UInt64
)
ENGINE = MergeTree
PARTITION BY toYYYYMMDD(`publish_time`)
ORDER BY (`topic`, `publish_time`, `message_id`)
{settings}""",
        f"""CREATE TABLE IF NOT EXISTS {db}.{q(LATE)}
(
    `app` LowCardinality(String),
    `group` LowCardinality(String),
    `batch_id` UInt64,
    `topic` LowCardinality(String),
    `message_id` String,
    `publish_time` DateTime64(3, 'UTC'),
    `event_time` DateTime64(3, 'UTC'),
    `key` String,
    `payload` String,
    `payload_bytes` UInt64
)
ENGINE = MergeTree
PARTITION BY toYYYYMMDD(`event_time`)
ORDER BY (`topic`, `event_time`, `message_id`)
{settings}""",
        f"""CREATE TABLE IF NOT EXISTS {db}.{q(PROGRESS)}
(
    `app` LowCardinality(String),
    `group` LowCardinality(String),
    `batch_id` UInt64,
    `topic` LowCardinality(String),
    `rows_in` UInt64,
    `rows_out` UInt64,
    `bad` UInt64,
    `late` UInt64,
    `lag` UInt64,
    `max_event_time` Nullable(DateTime64(3, 'UTC')),
    `min_publish_time` Nullable(DateTime64(3, 'UTC')),
    `max_publish_time` Nullable(DateTime64(3, 'UTC')),
    `batch_time` DateTime64(3, 'UTC'),
    `committed_at` DateTime64(3, 'UTC'),
    `duration_ms` UInt64,
    `watermark` DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(`committed_at`)
PARTITION BY toYYYYMMDD(`batch_time`)
ORDER BY (`app`, `group`, `batch_id`, `topic`)
{settings}""",
    ]


def ensure_clickhouse(client: Any, catalog: Catalog, database: str) -> list[str]:
    """Create or migrate every ClickHouse object the stream writes: the catalog's wide tables (new
    catalog columns are added in place) and the side tables. Returns the statements run."""
    applied = apply_ddl(client, catalog, database)
    for statement in side_table_ddl(database):
        client.command(statement)
    return [*applied, *side_table_ddl(database)]


def delta_partials(delta: DeltaSettings, table: str) -> str:
    return delta.path("bronze", f"{table}_partials")


def delta_side(delta: DeltaSettings, name: str) -> str:
    return delta.path("bronze", name)

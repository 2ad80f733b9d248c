"""The streaming job's side tables (quarantine, late events, progress), declared once, and where
every table the stream writes lives.

Wide tables are described by the catalog (:mod:`widehouse.clickhouse.ddl` for ClickHouse,
:mod:`widehouse.catalog.schema` for Delta); the side tables are :class:`~widehouse.shape.Shape`
objects below, rendered to ClickHouse DDL, a Delta schema and an Arrow schema from this one
declaration:

==================  ================================  ===========================================
what                ClickHouse (database ``wh``)      Delta (under WIDEHOUSE_DELTA_ROOT)
==================  ================================  ===========================================
partial wide rows   ``<table>_partial``               ``bronze/<table>_partials`` (by date, hour)
quarantine          ``quarantine``                    ``bronze/quarantine`` (by publish date)
late events         ``late_events``                   ``bronze/late_events`` (by event date)
progress            ``stream_progress``               ``bronze/stream_progress`` (by batch date)
per-hour counts     ``stream_counts``                 (ClickHouse only: read by reconciliation)
sink marks          ``stream_sink_marks``             (ClickHouse only: tables a batch has written)
==================  ================================  ===========================================

Every table carries the app, group and batch id of the micro-batch that wrote it, so a row can be
traced to its batch, and replays are recognisable.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from widehouse.settings import DeltaSettings
from widehouse.shape import Col, Shape

if TYPE_CHECKING:
    from widehouse.catalog import Catalog
    from widehouse.clickhouse import ClickHouse

QUARANTINE = "quarantine"
LATE = "late_events"
PROGRESS = "stream_progress"
GROUP_ROW = "*"
"""The ``topic`` of a progress row that describes the whole group (totals and the watermark)."""

_BATCH = (
    Col("app", "string", low_cardinality=True),
    Col("group", "string", low_cardinality=True),
    Col("batch_id", "uint64"),
    Col("topic", "string", low_cardinality=True),
)

QUARANTINE_SHAPE = Shape(
    QUARANTINE,
    (
        *_BATCH,
        Col("message_id", "string"),
        Col("publish_time", "timestamp"),
        Col("reason", "string", low_cardinality=True),
        Col("detail", "string"),
        Col("payload", "binary"),
        Col("payload_bytes", "uint64"),
    ),
    partition_by="publish_time",
    order_by=("topic", "publish_time", "message_id"),
    delta_indexed=6,
)

LATE_SHAPE = Shape(
    LATE,
    (
        *_BATCH,
        Col("message_id", "string"),
        Col("publish_time", "timestamp"),
        Col("event_time", "timestamp"),
        Col("key", "string"),
        Col("payload", "binary"),
        Col("payload_bytes", "uint64"),
    ),
    partition_by="event_time",
    order_by=("topic", "event_time", "message_id"),
    delta_indexed=6,
)

PROGRESS_SHAPE = Shape(
    PROGRESS,
    (
        *_BATCH,
        Col("rows_in", "uint64"),
        Col("rows_out", "uint64"),
        Col("bad", "uint64"),
        Col("late", "uint64"),
        Col("lag", "uint64"),
        Col("max_event_time", "timestamp", nullable=True),
        Col("min_publish_time", "timestamp", nullable=True),
        Col("max_publish_time", "timestamp", nullable=True),
        Col("batch_time", "timestamp"),
        Col("committed_at", "timestamp"),
        Col("duration_ms", "uint64"),
        Col("watermark", "timestamp"),
    ),
    partition_by="batch_time",
    order_by=("app", "group", "batch_id", "topic"),
    engine="ReplacingMergeTree(`committed_at`)",
    delta_indexed=4,
)

SIDE_SHAPES: dict[str, Shape] = {s.name: s for s in (QUARANTINE_SHAPE, LATE_SHAPE, PROGRESS_SHAPE)}
"""Every side table of the stream in both sinks, by name."""

COUNTS = "stream_counts"
COUNTS_SHAPE = Shape(
    COUNTS,
    (
        *_BATCH,
        Col("publish_hour", "timestamp"),
        Col("rows_in", "uint64"),
        Col("rows_out", "uint64"),
        Col("bad", "uint64"),
        Col("late", "uint64"),
    ),
    partition_by="publish_hour",
    order_by=("publish_hour", "topic", "app", "group", "batch_id"),
    engine="ReplacingMergeTree",
)
"""Messages a batch read per (topic, publish hour): in = out (valid) + bad + late. ClickHouse only;
the hourly reconciliation compares them with the broker and with the quarantine and late tables. A
replayed batch writes the same rows, which the engine collapses (read with ``FINAL``)."""


MARKS = "stream_sink_marks"
MARKS_SHAPE = Shape(
    MARKS,
    (
        Col("app", "string", low_cardinality=True),
        Col("group", "string", low_cardinality=True),
        Col("batch_id", "uint64"),
        Col("table", "string", low_cardinality=True),
        Col("committed_at", "timestamp"),
    ),
    partition_by="committed_at",
    order_by=("app", "group", "batch_id", "table"),
    engine="ReplacingMergeTree",
)
"""One row per ClickHouse table a batch has written, inserted right after that table's insert. The
group's last committed batch comes from ``stream_progress`` (written last); these marks tell, for the
one batch a crash may have left half-written, which tables already hold it, so its replay skips them
whatever happened to the deduplication window meanwhile (:mod:`widehouse.stream.commits`)."""


def ensure_clickhouse(client: ClickHouse, catalog: Catalog) -> list[str]:
    """Create or migrate every ClickHouse object the stream writes: the catalog's wide tables (new
    catalog columns are added in place) and the side tables. Returns the statements run."""
    shapes = [*SIDE_SHAPES.values(), COUNTS_SHAPE, MARKS_SHAPE]
    return [*client.ensure_wide_tables(catalog), *client.ensure_shapes(shapes)]


def delta_partials(delta: DeltaSettings, table: str) -> str:
    return delta.path("bronze", f"{table}_partials")


def delta_side(delta: DeltaSettings, name: str) -> str:
    return delta.path("bronze", name)

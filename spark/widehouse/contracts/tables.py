"""Every internal table's name and shape, declared once.

The catalog's wide tables are described by the catalog (:mod:`widehouse.clickhouse.ddl` for
ClickHouse, :mod:`widehouse.catalog.schema` for Delta); the tables the pipeline adds are the
:class:`~widehouse.shape.Shape` objects below, rendered to ClickHouse DDL, a Delta schema and an
Arrow schema from this one declaration. The stream writes the first five, the batch layer the rest:

==================  ================================  ===========================================
what                ClickHouse (database ``wh``)      Delta (under WIDEHOUSE_DELTA_ROOT)
==================  ================================  ===========================================
partial wide rows   ``<table>_partial``               ``bronze/<table>_partials`` (by date, hour)
quarantine          ``quarantine``                    ``bronze/quarantine`` (by publish date)
late events         ``late_events``                   ``bronze/late_events`` (by event date)
progress            ``stream_progress``               ``bronze/stream_progress`` (by batch date)
per-hour counts     ``stream_counts``                 (ClickHouse only: read by reconciliation)
sink marks          ``stream_sink_marks``             (ClickHouse only: tables a batch has written)
ledger              ``finalized_periods``             (ClickHouse only: what is published)
publications        ``publications``                  (ClickHouse only: prepared publications)
reconciliation      ``reconciliation``                (ClickHouse only: counts per hour and topic)
publish leases      ``publish_leases``                (ClickHouse only: one publisher per period)
repairs             ``repairs``, ``repair_chunks``    (ClickHouse only: quarantined events re-parsed)
==================  ================================  ===========================================

Every stream table carries the app, group and batch id of the micro-batch that wrote it, so a row
can be traced to its batch, and replays are recognisable. What the rows mean and who writes them:
:mod:`widehouse.stream.tables`, :mod:`widehouse.batch.ledger`, :mod:`widehouse.batch.lease`.
"""

from __future__ import annotations

import re

from widehouse.shape import Col, Shape

# -- the stream's tables ------------------------------------------------------------------------

QUARANTINE = "quarantine"
LATE = "late_events"
PROGRESS = "stream_progress"
COUNTS = "stream_counts"
MARKS = "stream_sink_marks"
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

COLLAPSED_ON_REPLAY: frozenset[str] = frozenset({COUNTS})
"""The stream's ClickHouse tables whose replayed rows collapse into the first ones: a
``ReplacingMergeTree`` whose key holds (app, group, batch_id), read with ``FINAL`` by every reader. The
sink writes them beside the batch's other tables and without a sink mark: a replay may write them again.
"""

BATCH_TRACED: dict[str, str] = {QUARANTINE: "publish_time", LATE: "event_time"}
"""The stream's ClickHouse tables that answer for their own batches, by the time column of their
sorting key: one row per message, each carrying its app, group and batch id, sorted by (topic, that
time). A replay after a crash asks the table how many of the batch's rows it holds, among the rows
of the replayed rows' topics and time range (cheap on a large table: the sorting key narrows it),
instead of a sink mark (:mod:`widehouse.stream.commits`)."""

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
"""One row per ClickHouse table a batch has written (but :data:`COLLAPSED_ON_REPLAY` and
:data:`BATCH_TRACED`), all of a batch's rows in one insert once its tables' inserts have ended. The
group's last committed batch comes from ``stream_progress`` (written last); these marks tell, for
the one batch a crash may have left half-written, which tables already hold it, so its replay skips
them whatever happened to the deduplication window meanwhile (:mod:`widehouse.stream.commits`)."""

STREAM_SHAPES: tuple[Shape, ...] = (*SIDE_SHAPES.values(), COUNTS_SHAPE, MARKS_SHAPE)
"""Every ClickHouse table of the stream besides the catalog's wide tables."""

# -- the batch layer's tables -------------------------------------------------------------------

LEDGER = "finalized_periods"
PUBLICATIONS = "publications"
RECONCILIATION = "reconciliation"
LEASES = "publish_leases"

LEDGER_SHAPE = Shape(
    LEDGER,
    (
        Col("table", "string", low_cardinality=True),
        Col("period", "timestamp"),
        Col("finalized_at", "timestamp"),
        Col("run_id", "string"),
        Col("kind", "string", low_cardinality=True),
        Col("rows", "uint64"),
        Col("forced", "boolean"),
        Col("include_late", "boolean"),
        Col("late_rows", "uint64"),
        Col("reconciliation", "string", low_cardinality=True),
        Col("note", "string"),
        Col("airflow_run", "string"),
    ),
    partition_by="period",
    order_by=("table", "period", "finalized_at"),
)
"""One row per publish of a period (hour or day) of a table: what was published, when, how. The
analyst views read it (:func:`widehouse.clickhouse.ddl.analyst_view_ddl`). ``run_id`` is Widehouse's
own run (lease holders, scratch tables); ``airflow_run`` the Airflow DAG run that ran the job,
``<dag id>/<run id>`` (:func:`widehouse.contracts.identity.airflow_run_ref`), or '' when no Airflow
task ran it. ``airflow_run`` came later: :meth:`widehouse.clickhouse.client.ClickHouse.ensure_shapes`
adds it to a ledger (and ``publications``) made before, whose older rows then read ''."""

PUBLICATION_SHAPE = Shape(
    PUBLICATIONS,
    LEDGER_SHAPE.columns,
    partition_by="period",
    order_by=("table", "period", "finalized_at"),
)
"""The ledger row of each *prepared* publication (its rows staged in ``<T>_final``): a decided
publication, committed to Delta and the ledger next (or rolled forward by the next run)."""

RECONCILIATION_SHAPE = Shape(
    RECONCILIATION,
    (
        Col("table", "string", low_cardinality=True),
        Col("hour", "timestamp"),
        Col("topic", "string", low_cardinality=True),
        Col("run_id", "string"),
        Col("checked_at", "timestamp"),
        Col("broker", "uint64"),
        Col("counted_in", "uint64"),
        Col("valid", "uint64"),
        Col("quarantined", "uint64"),
        Col("late", "uint64"),
        Col("status", "string", low_cardinality=True),
        Col("detail", "string"),
        Col("repaired", "uint64"),
    ),
    partition_by="hour",
    order_by=("table", "hour", "topic", "checked_at"),
)
"""Per (table, hour, topic) and run: the broker's messages of the hour's publish-time range, what
the stream counted in, and valid + quarantined + late; ``status`` ok / mismatch / accepted.
``repaired``: of ``valid``, quarantined messages a repair folded in since (no longer quarantined).
Added after the first release: an existing table gets it from ``ensure_shapes`` (0 in older rows)."""

LEASE_SHAPE = Shape(
    LEASES,
    (
        Col("table", "string", low_cardinality=True),
        Col("period", "timestamp"),
        Col("generation", "uint64"),
        Col("event", "string", low_cardinality=True),  # claim | renew | release
        Col("holder", "string"),
        Col("host", "string"),
        Col("pid", "uint64"),
        Col("at", "timestamp"),
        Col("expires_at", "timestamp"),
    ),
    partition_by="period",
    order_by=("table", "period", "generation"),
)
"""Claims, renewals and releases of publish leases (one generation = one holder)."""

# -- repairs of quarantined events (:mod:`widehouse.repair`) --------------------------------------

REPAIRS = "repairs"
REPAIR_CHUNKS = "repair_chunks"
REPAIRED, STILL_INVALID = "repaired", "invalid"
"""A ``repairs`` row's ``outcome``."""

REPAIRS_SHAPE = Shape(
    REPAIRS,
    (
        Col("table", "string", low_cardinality=True),
        Col("topic", "string", low_cardinality=True),
        Col("message_id", "string"),
        Col("publish_time", "timestamp"),
        Col("outcome", "string", low_cardinality=True),  # repaired | invalid
        Col("reason", "string", low_cardinality=True),
        Col("detail", "string"),
        Col("chunk", "uint64"),
        Col("run_id", "string"),
        Col("at", "timestamp"),
    ),
    partition_by="publish_time",
    order_by=("table", "topic", "message_id", "at"),
)
"""One row per (wide table, quarantined message) and repair run that changed its outcome: ``repaired``
(re-parsed valid with the catalog of that run and folded into the table's partials by ``chunk``,
1, 2, ... per table) or ``invalid`` (still rejected: the new ``reason`` and ``detail``, chunk 0).
A repaired row counts once its chunk is in ``repair_chunks``."""

REPAIR_CHUNKS_SHAPE = Shape(
    REPAIR_CHUNKS,
    (
        Col("table", "string", low_cardinality=True),
        Col("chunk", "uint64"),
        Col("hour", "timestamp"),
        Col("rows", "uint64"),
        Col("run_id", "string"),
        Col("done_at", "timestamp"),
    ),
    partition_by="done_at",
    order_by=("table", "chunk", "hour"),
)
"""A chunk of repaired events whose partial rows are in both stores: one row per hour the chunk
touched (``rows``: the partial rows it added there), written after the partials. A chunk with ``repairs`` rows
and no row here was cut short and is redone first by the next repair of the table."""

REPAIR_SHAPES: tuple[Shape, ...] = (REPAIRS_SHAPE, REPAIR_CHUNKS_SHAPE)

BATCH_SHAPES: tuple[Shape, ...] = (
    LEDGER_SHAPE,
    PUBLICATION_SHAPE,
    RECONCILIATION_SHAPE,
    LEASE_SHAPE,
    *REPAIR_SHAPES,
)
"""Every ClickHouse table of the batch layer (the reconciliation reads the repairs)."""

IDEMPOTENCY_RECORDS: frozenset[str] = frozenset(
    {PROGRESS, MARKS, LEDGER, PUBLICATIONS, LEASES, REPAIRS, REPAIR_CHUNKS}
)
"""The tables whose rows decide whether a batch or a period is written (again): the stream's last
committed batch and per-table marks, the ledger, the prepared publications and the publish leases.
On a ClickHouse cluster they are written with a quorum and read with sequential consistency
(:class:`widehouse.clickhouse.client.ClickHouse`), so a read on a lagging replica cannot miss one."""

# -- on a ClickHouse cluster ----------------------------------------------------------------------

_CLUSTER_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,126}")


def check_cluster_name(name: str) -> str:
    """A ClickHouse cluster name as ``remote_servers`` spells it and the DDL quotes it
    (``ON CLUSTER '<name>'``): letters, digits, ``_``, ``.``, ``-``. Raises ValueError (without the
    value: callers name it) otherwise."""
    if not _CLUSTER_NAME_RE.fullmatch(name):
        raise ValueError("must be letters, digits, '_', '.' or '-', starting with a letter or '_'")
    return name


__all__ = [
    "BATCH_SHAPES",
    "COLLAPSED_ON_REPLAY",
    "COUNTS",
    "COUNTS_SHAPE",
    "GROUP_ROW",
    "IDEMPOTENCY_RECORDS",
    "LATE",
    "LATE_SHAPE",
    "LEASES",
    "LEASE_SHAPE",
    "LEDGER",
    "LEDGER_SHAPE",
    "MARKS",
    "MARKS_SHAPE",
    "PROGRESS",
    "PROGRESS_SHAPE",
    "PUBLICATIONS",
    "PUBLICATION_SHAPE",
    "QUARANTINE",
    "QUARANTINE_SHAPE",
    "RECONCILIATION",
    "RECONCILIATION_SHAPE",
    "REPAIRED",
    "REPAIRS",
    "REPAIRS_SHAPE",
    "REPAIR_CHUNKS",
    "REPAIR_CHUNKS_SHAPE",
    "REPAIR_SHAPES",
    "SIDE_SHAPES",
    "STILL_INVALID",
    "STREAM_SHAPES",
    "check_cluster_name",
]

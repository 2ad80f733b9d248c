"""One micro-batch of a slot group: transform once, merge per (key, hour), write every sink.

``BatchWriter(...)(df, batch_id)`` is the ``foreachBatch`` function of a group's query:

1. The group's source (:mod:`widehouse.stream.spark.source`) runs
   :func:`widehouse.stream.transform.transform_packed` inside its reading tasks (parse every topic
   by its schema, classify, fold events into partial rows per (table, key, hour)) and one Spark job
   brings the (already collapsed) output to the driver as Arrow IPC bytes, unpacked there: the
   Pulsar data is read once, whatever the number of topics and sinks, and both sinks write the
   same rows.
2. Per wide table, partial rows from all input partitions are merged per (key, hour) on the driver
   with the catalog's merge functions (sum, min, max, first/last by event time), in Arrow; a partial
   sum that would overflow the merge is quarantined with reason ``overflow`` first (``merge.settle``).
3. Meanwhile, on the writer's thread, what the sinks need from elsewhere: the replay guard's check
   (:mod:`widehouse.stream.spark.replay`, before any sink write; a batch that fails before its sinks
   drops the record the guard made of it), whether ClickHouse still lacks the
   batch (the ledger's :meth:`~widehouse.stream.commits.ClickHouseLedger.begin`) and the batch's
   offset log entry (planning time, per-topic metrics): file and ClickHouse round trips that would
   otherwise wait for the merge, and the merge for them.
4. Sinks, each idempotent per (app, group, batch), the two side by side: ClickHouse ``<table>_partial``,
   quarantine, late and per-hour counts tables, several at once (skipped when the group already
   committed the batch, :mod:`widehouse.stream.commits`); meanwhile, on a thread, Delta partials,
   quarantine and late tables, appended from the driver with delta-rs (:mod:`widehouse.stream.bronze`,
   no Spark job); once both have ended, the progress rows (per
   topic: rows in/out, bad, late, lag, max event time, publish-time range; per group: the
   watermark), again without a Spark job and again to the two sinks side by side.

Progress rows and the group's watermark are computed by :mod:`widehouse.stream.progress`.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from widehouse.catalog import Catalog
from widehouse.contracts.tables import COUNTS, LATE, PROGRESS, PROGRESS_SHAPE, QUARANTINE
from widehouse.stream import merge
from widehouse.stream.plan import KIND_LATE, KIND_QUARANTINE, TransformPlan
from widehouse.stream.transform import unpack

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from widehouse.clickhouse import ClickHouse
    from widehouse.settings import DeltaSettings

from widehouse.source.metrics import BatchLog
from widehouse.stream.bronze import BronzeTable, BronzeWriter, bronze_tables, with_date, with_partials_meta
from widehouse.stream.commits import ClickHouseLedger
from widehouse.stream.options import Fault
from widehouse.stream.progress import BatchIdentity, progress_rows
from widehouse.stream.replay_guard import group_fingerprint

log = logging.getLogger("widehouse.stream")

TIMINGS_KEPT = 1_000
"""Batches whose phase timings a writer keeps (the last ones): a live stream runs for months."""


@dataclass(frozen=True)
class BatchOutputs:
    """What one micro-batch writes, on the driver as Arrow: merged partials per table, side rows."""

    partials: dict[str, Any]
    quarantine: Any
    late: Any


@dataclass(frozen=True)
class Ready:
    """What a batch's sinks need from elsewhere, read while the driver merges (:meth:`BatchWriter._ahead`)."""

    write_clickhouse: bool
    """ClickHouse is a sink and does not hold the batch yet (the ledger's ``begin``)."""
    batch_log: BatchLog
    """The batch's offset log entry: its planning time and per-topic metrics."""
    recorded: bool
    """The replay guard recorded the batch's catalog in this run (no record of it existed): dropped
    again if the batch fails before its sinks (:meth:`BatchWriter._forget_record`)."""


@dataclass
class BatchWriter:
    """The ``foreachBatch`` function of one slot group's query (runs on the driver)."""

    spark: SparkSession
    catalog: Catalog
    group: str
    topics: tuple[str, ...]
    app: str
    checkpoint: str
    sinks: tuple[str, ...]
    delta: DeltaSettings
    clickhouse: Callable[[], ClickHouse]
    """Returns the process's ClickHouse client (created lazily, on the driver)."""
    bronze: BronzeWriter
    """The app's delta-rs writer of the bronze tables (shared by its groups)."""
    faults: tuple[Fault, ...] = ()
    after_commit: Callable[[pa.Table, list[dict[str, Any]], int], None] | None = None
    """Called with (quarantine, progress rows, batch id) once sinks and progress are written
    (dead letters, watermark events: :mod:`widehouse.stream.publishers`)."""
    plan: TransformPlan = field(init=False)
    bronze_tables: dict[str, BronzeTable] = field(init=False)
    ledger: ClickHouseLedger = field(init=False)
    fired: set[tuple[str, int]] = field(default_factory=set)
    timings: deque[dict[str, float]] = field(default_factory=lambda: deque(maxlen=TIMINGS_KEPT))
    """Per batch written by this writer, the last :data:`TIMINGS_KEPT`: rows in and seconds per
    phase (benchmarks read them)."""
    batches: int = 0
    """Micro-batches this writer has run to the end (this process; a replay the sinks already held
    counts too)."""
    drained: int = 0
    """Messages read by this writer's committed batches (this process)."""
    lag: int | None = None
    """Messages left after the last committed batch, as planned (None before the first)."""
    idle: threading.Event = field(init=False)
    """Set while no micro-batch of this group is being written (a clean stop waits for it)."""
    fingerprint: str = field(init=False)
    """The part of the catalog the group uses (:func:`widehouse.stream.replay_guard.group_fingerprint`)."""
    _lanes_opened: bool = field(default=False, init=False, repr=False)
    """The ledger's ClickHouse lanes were asked to open ahead (the first batch does it)."""
    _sinks_pool: ThreadPoolExecutor | None = field(default=None, init=False, repr=False)
    """The writer's thread (made by the first batch): a batch's :meth:`_ahead` while the driver merges,
    then Delta's appends beside ClickHouse's inserts."""

    def __post_init__(self) -> None:
        self.plan = TransformPlan.for_topics(self.catalog, list(self.topics))
        self.bronze_tables = bronze_tables(self.catalog, self.delta, self.plan.tables)
        self.ledger = ClickHouseLedger(self.clickhouse, self.app, self.group)
        self.fingerprint = group_fingerprint(self.catalog, self.topics)
        self.idle = threading.Event()
        self.idle.set()

    # -- faults ------------------------------------------------------------------------------
    def _fault(self, point: str, batch_id: int) -> Fault | None:
        for fault in self.faults:
            if fault.point == point and fault.batch_id == batch_id and (point, batch_id) not in self.fired:
                self.fired.add((point, batch_id))
                if fault.kill:
                    log.warning("fault injection: SIGKILL at %s of batch %d", point, batch_id)
                    os.kill(os.getpid(), signal.SIGKILL)
                return fault
        return None

    def _raise_at(self, point: str, batch_id: int) -> None:
        if self._fault(point, batch_id) is not None:
            from widehouse.stream.options import FaultInjected

            raise FaultInjected(f"injected failure at {point} of batch {batch_id}")

    # -- the batch ---------------------------------------------------------------------------
    def __call__(self, df: DataFrame, batch_id: int) -> None:
        self.idle.clear()
        try:
            self._write(df, batch_id)
        finally:
            self.idle.set()

    def _write(self, df: DataFrame, batch_id: int) -> None:
        started = time.time()
        clock = _Clock()
        identity = BatchIdentity(self.app, self.group, batch_id)
        if not self._lanes_opened and "clickhouse" in self.sinks:
            # the first batch's ClickHouse connections open on the writer's thread while its tasks
            # read, ahead of _ahead (the thread runs one thing at a time, in order)
            self._lanes_opened = True
            self._pool().submit(self._open_lanes)
        # One Spark job reads the batch once, transformed inside the reading tasks (the group's
        # source, widehouse.stream.spark.source), and brings the (already collapsed) output to the
        # driver as Arrow IPC bytes; both sinks then write the same Arrow data: no recomputation,
        # identical on replay.
        out = unpack(df.toArrow(), self.plan)
        clock.lap("read+transform")
        ahead = self._pool().submit(self._ahead, identity)
        try:
            # partial sums that would overflow their merge go to quarantine (reason overflow), not wrapped
            out = merge.settle(out, self.plan)
            outputs = BatchOutputs(
                partials={name: merge.partials(out, self.plan, name) for name in self.plan.tables},
                quarantine=merge.side(out, KIND_QUARANTINE, self.app, self.group, batch_id),
                late=merge.side(out, KIND_LATE, self.app, self.group, batch_id),
            )
            stats = merge.topic_stats(out)
            counts = merge.hour_counts(out, self.app, self.group, batch_id)
            clock.lap("merge")
        except BaseException:
            wait([ahead])  # the merge's failure is the batch's, once nothing of the batch still runs
            if not ahead.cancelled() and ahead.exception() is None:
                self._forget_record(ahead.result().recorded, identity)
            raise
        ready = ahead.result()  # the guard's refusal is the batch's (no sink has written yet)
        clock.lap("ahead")
        self._raise_at("before-sinks", batch_id)
        self._write_sinks(outputs, counts, identity, clock, ready.write_clickhouse)
        # Spark records the planning time in every offset log; the batch start only stands in for an odd one
        planned_ms = ready.batch_log.planned_ms or int(started * 1000)
        progress = progress_rows(identity, stats, ready.batch_log.metrics, planned_ms, started)
        self._write_progress(progress, identity, ready.write_clickhouse)
        clock.lap("progress")
        if self.after_commit is not None:
            self.after_commit(outputs.quarantine, progress, batch_id)
            clock.lap("publish")
        self._raise_at("after-sinks", batch_id)
        totals = progress[-1]
        self.drained += int(totals["rows_in"])
        self.lag = int(totals["lag"])
        self._record(batch_id, int(totals["rows_in"]), clock.laps)
        log.info(
            "group %s batch %d: %d in, %d out, %d bad, %d late, lag %d, watermark %s, %.1fs (%s)",
            self.group,
            batch_id,
            totals["rows_in"],
            totals["rows_out"],
            totals["bad"],
            totals["late"],
            totals["lag"],
            totals["watermark"].isoformat(),
            time.time() - started,
            clock,
        )

    def _ahead(self, identity: BatchIdentity) -> Ready:
        """What the batch's sinks need from elsewhere (on the writer's thread, while the driver merges):
        the replay guard's check (a replay under another catalog is refused before any sink writes;
        a new batch's catalog is recorded), whether ClickHouse still lacks the batch, and the batch's
        offset log entry."""
        from widehouse.source.spark import read_batch_log
        from widehouse.stream.spark.replay import guard_batch

        recorded = guard_batch(self.spark, self.checkpoint, self.fingerprint, identity)
        try:
            write_clickhouse = "clickhouse" in self.sinks and self.ledger.begin(identity.batch_id)
            batch_log = read_batch_log(self.spark, self.checkpoint, identity.batch_id)
        except BaseException:
            self._forget_record(recorded, identity)
            raise
        return Ready(write_clickhouse, batch_log, recorded)

    def _forget_record(self, recorded: bool, identity: BatchIdentity) -> None:
        """The batch failed before any sink wrote: drop the guard's record of its catalog if this run
        made it, so a replay under a changed catalog is not refused for writes that never happened.
        A failure to drop it is logged (the batch's own error is the one raised): the record then
        stays, which only refuses such a replay, as a kill before the sinks does."""
        if not recorded:
            return
        from widehouse.stream.spark.replay import drop_batch_record

        try:
            drop_batch_record(self.spark, self.checkpoint, identity)
        except Exception as exc:  # the batch's own error is the one raised; this one is logged
            log.warning(
                "group %s batch %d: the replay guard's record was not dropped: %s",
                self.group,
                identity.batch_id,
                exc,
            )

    def _open_lanes(self) -> None:
        """Open the ledger's lanes; a failure is left to the inserts, which open what is missing and
        raise with the full explanation."""
        try:
            self.ledger.open_lanes()
        except Exception as exc:  # the batch's inserts raise it again, where it is the batch's error
            log.debug("group %s: the ClickHouse lanes did not open ahead: %s", self.group, exc)

    def _pool(self) -> ThreadPoolExecutor:
        if self._sinks_pool is None:
            self._sinks_pool = ThreadPoolExecutor(1, thread_name_prefix=f"sinks-{self.group}")
        return self._sinks_pool

    def _record(self, batch_id: int, rows_in: int, laps: list[tuple[str, float]]) -> None:
        """Count the batch and keep its timings (the oldest kept one goes past :data:`TIMINGS_KEPT`)."""
        self.batches += 1
        self.timings.append({"batch_id": batch_id, "rows_in": rows_in, **dict(laps)})

    # -- sinks -------------------------------------------------------------------------------
    def _write_sinks(
        self,
        outputs: BatchOutputs,
        counts: pa.Table,
        identity: BatchIdentity,
        clock: _Clock,
        write_clickhouse: bool,
    ) -> None:
        """Both sinks of the batch side by side: Delta's appends on the writer's thread while the
        ClickHouse inserts run on this one (``write_clickhouse``: ClickHouse is a sink and lacks the
        batch). Each sink is idempotent per (app, group, batch) on its own (the ClickHouse
        ledger's marks, Delta's transaction ids), so their order does not matter to a replay; the
        progress rows, the batch's commit in each sink, follow once both have ended. A failure is
        raised once both have ended (ClickHouse's before Delta's), so no append outlives its batch.
        The ``delta`` lap is the wait for Delta after ClickHouse ended (the wall it adds).
        """
        batch_id = identity.batch_id

        def clickhouse() -> None:
            if write_clickhouse:
                self._write_clickhouse(outputs, counts, identity)
                clock.lap("clickhouse")
            self._raise_at("after-clickhouse", batch_id)

        delta = (lambda: self._write_delta(outputs, identity)) if "delta" in self.sinks else None
        self._side_by_side(batch_id, clickhouse, delta, "sink")
        if delta is not None:
            clock.lap("delta")
        self._raise_at("after-delta", batch_id)

    def _side_by_side(
        self, batch_id: int, here: Callable[[], None], delta: Callable[[], None] | None, what: str
    ) -> None:
        """``here`` (ClickHouse's part) on this thread while ``delta`` runs on the writer's thread.
        A failure is raised once both have ended, ``here``'s before Delta's (Delta's is then logged,
        naming ``what``), so no write outlives its batch."""
        future: Future[None] | None = self._pool().submit(delta) if delta is not None else None
        try:
            here()
        except BaseException:
            error = future.exception() if future is not None else None  # exception() waits
            if error is not None:
                log.warning(
                    "group %s batch %d: the Delta %s failed too: %s", self.group, batch_id, what, error
                )
            raise
        if future is not None:
            future.result()

    def _write_clickhouse(self, outputs: BatchOutputs, counts: pa.Table, identity: BatchIdentity) -> None:
        """Each table's rows and the batch's counts, several tables at once, unless this group already
        committed the batch (see ``commits``). All of them precede the progress rows: a committed batch
        has its counts."""
        from widehouse.clickhouse.ddl import table_names

        writes = [
            (table_names(self.catalog.table(name)).partial, data) for name, data in outputs.partials.items()
        ]
        writes += [(QUARANTINE, outputs.quarantine), (LATE, outputs.late), (COUNTS, counts)]
        self.ledger.insert_all(
            writes,
            identity,
            # a failure mid-batch
            after_first=lambda: self._raise_at("clickhouse-insert", identity.batch_id),
        )

    def close(self) -> None:
        """Close the connections and the thread the writer opened (the app's client stays the app's)."""
        self.ledger.close()
        pool, self._sinks_pool = self._sinks_pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    def _write_delta(self, outputs: BatchOutputs, identity: BatchIdentity) -> None:
        """Every bronze table of the batch from the driver with delta-rs (no Spark job), in parallel
        threads; each append is skipped when the table already records this batch for the group."""
        writes: list[tuple[BronzeTable, pa.Table]] = [
            (self.bronze_tables[name], with_partials_meta(data, identity.group, identity.batch_id))
            for name, data in outputs.partials.items()
            if data.num_rows
        ]
        writes += [
            (self.bronze_tables[name], with_date(data, when))
            for name, data, when in (
                (QUARANTINE, outputs.quarantine, "publish_time"),
                (LATE, outputs.late, "event_time"),
            )
            if data.num_rows
        ]
        with ThreadPoolExecutor(max_workers=4, thread_name_prefix=f"delta-{identity.group}") as pool:
            futures = [
                pool.submit(
                    self.bronze.append, table, data, identity.txn_app_id(table.name), identity.batch_id
                )
                for table, data in writes
            ]
            for future in futures:
                future.result()

    def _write_progress(
        self, rows: list[dict[str, Any]], identity: BatchIdentity, write_clickhouse: bool
    ) -> None:
        """The progress rows, the batch's commit mark in each sink, the two side by side (each sink's
        commit stands on its own: the order of the two does not matter to a replay); no Spark job."""
        import pyarrow as pa

        table = pa.Table.from_pylist(rows, schema=PROGRESS_SHAPE.arrow_schema())

        def clickhouse() -> None:
            if write_clickhouse:
                self.ledger.commit(identity, table)

        def delta() -> None:
            progress = self.bronze_tables[PROGRESS]
            self.bronze.append(
                progress, with_date(table, "batch_time"), identity.txn_app_id(PROGRESS), identity.batch_id
            )

        self._side_by_side(
            identity.batch_id, clickhouse, delta if "delta" in self.sinks else None, "progress"
        )


class _Clock:
    """Wall time per phase of a batch, for the log line."""

    def __init__(self) -> None:
        self.last = time.monotonic()
        self.laps: list[tuple[str, float]] = []

    def lap(self, name: str) -> None:
        now = time.monotonic()
        self.laps.append((name, now - self.last))
        self.last = now

    def __str__(self) -> str:
        return ", ".join(f"{name} {seconds:.1f}s" for name, seconds in self.laps)

"""Run slot groups as Structured Streaming queries: start, watch, restart, stop on SIGTERM.

One query per slot group, each with its own checkpoint (``<checkpoint root>/<app>/<group>``), its own
Pulsar subscription (``appId`` = ``<app>-<group>``) and its own idempotency key. On a cluster every
group runs as its own app (``stream_wide.py --group g001``); locally several groups can share one app
(``--group g001 --group g002``), which is also how they share the embedded ClickHouse engine (chDB
serves one process). A topic a replan moved to a group continues where its old group committed it
(:mod:`widehouse.source.handover`).

A query that fails is restarted from its checkpoint after a backoff, and given up after
``max_restarts`` consecutive failures with no batch committed in between (the policy is
:mod:`widehouse.stream.restart`; the sinks are idempotent, so the replay is harmless).
SIGTERM/SIGINT stop the app cleanly: each query gets up to ``stop_grace_seconds`` to finish the
micro-batch it is running, then it is stopped; a batch that did not finish is replayed by the next
run.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any
from xml.sax.saxutils import quoteattr

from widehouse import clickhouse
from widehouse.catalog import Catalog, load_catalog
from widehouse.contracts.identity import group_app_id
from widehouse.errors import CheckpointError, ConfigError
from widehouse.private import private_dir
from widehouse.settings import Settings
from widehouse.stream.bronze import BronzeTable, BronzeWriter
from widehouse.stream.options import GroupSpec, RunOptions, resolve_run
from widehouse.stream.publishers import StreamPublishers
from widehouse.stream.restart import GiveUp, RestartBook, RestartPolicy
from widehouse.stream.spark.warmup import plan_read_early, warm_workers
from widehouse.stream.tables import ensure_clickhouse
from widehouse.stream.upkeep import BronzeUpkeep

if TYPE_CHECKING:
    from widehouse.stream.spark.batch import BatchWriter

log = logging.getLogger("widehouse.stream")

PYTHON_PRELOAD = ("widehouse.stream.spark.source", "widehouse.stream.transform", "pandas")
"""What Spark's Python processes of a stream import before their first batch, imported by the fork
server (:mod:`widehouse.spark.fork_server`) while the JVM starts: the groups' sources (every process
unpickles them), the transform the reading tasks run, and pandas, which pyarrow imports as a task
builds its first output (~0.3 core-s a worker otherwise; its numpy random state is drawn again in
each fork). Not the Pulsar client's library, which a fork server must not load
(:data:`widehouse.spark.fork_state.FORK_UNSAFE`): the warm-up imports it into each worker
(:mod:`widehouse.stream.spark.warmup`)."""
QUERY_MODULES = (
    "widehouse.stream.spark.batch",
    "widehouse.stream.spark.handover",
    "widehouse.stream.spark.source",
)
"""What a group's query start needs beyond this module (the batch writer with pandas, Spark's
Python data source API, pyarrow's compute): ~0.3 s of imports in a `widehouse stream` process,
which :meth:`StreamApp.start` does while the JVM starts, not before it (this module's import) nor
after it (the first query's start)."""

ALLOCATION_FILE = "spark.scheduler.allocation.file"


class StreamApp:
    """The queries of one app (one or more slot groups) in one Spark session."""

    def __init__(
        self, settings: Settings, groups: list[GroupSpec], options: RunOptions, spark: Any = None
    ) -> None:
        if not groups:
            raise ConfigError("no slot group to run: give --group NAME (or --all-groups) with a plan")
        names = [g.name for g in groups]
        if len(set(names)) != len(names):
            raise ConfigError(f"slot group listed twice: {names}")
        self.settings = settings
        self.groups = groups
        self.options = options
        catalog = load_catalog(settings.schemas_dir)
        suffix = settings.stream.tenant_suffix
        self.catalog: Catalog = catalog.relocated(suffix) if suffix else catalog
        self._spark = spark
        self._client: clickhouse.ClickHouse | None = None
        self._client_lock = threading.Lock()
        self.bronze = BronzeWriter()
        """The app's writer of the bronze Delta tables (delta-rs, from the driver)."""
        self.upkeep: BronzeUpkeep | None = None
        """Compacts and vacuums the bronze tables while the app runs (after :meth:`start`)."""
        self._stop = threading.Event()
        self.queries: dict[str, Any] = {}
        self.writers: dict[str, BatchWriter] = {}
        self.restarts: dict[str, int] = {g.name: 0 for g in groups}
        """Restarts per group over the app's life (the give-up rule counts consecutive ones)."""
        self.book = RestartBook(RestartPolicy.of(settings.stream))
        self._batches: dict[str, int] = {}  # last committed batch id seen per group
        self.failed: dict[str, str] = {}
        """Groups given up after ``max_restarts`` consecutive failures, with the reason."""
        self.publishers = StreamPublishers(settings)
        """Dead letters and watermark events after each committed batch (one Pulsar client)."""
        self._started: float | None = None
        self.fired_faults: set[tuple[str, int]] = set()
        """Injected faults fire once per process, also across in-process query restarts."""

    # -- resources ---------------------------------------------------------------------------
    @property
    def spark(self) -> Any:
        if self._spark is None:
            from widehouse.spark.session import build_session

            label = self.groups[0].name if len(self.groups) == 1 else f"{len(self.groups)}-groups"
            with tempfile.TemporaryDirectory(prefix="widehouse-pools-") as folder:
                self._spark = build_session(
                    self.settings,
                    f"widehouse-stream-{label}",
                    session_overrides(self.settings, self.groups, Path(folder)),
                    workload="stream",  # C1 only under `auto`: a quicker start, the same running cost
                    python_preload=PYTHON_PRELOAD,
                )
        return self._spark

    def _launch_spark(self) -> threading.Thread:
        """Build the session in a thread; a failure there is raised again by ``self.spark``."""

        def build() -> None:
            try:
                _ = self.spark
            except Exception:  # raised again where the session is first used, on the caller's thread
                log.debug("the Spark session could not be built in the background", exc_info=True)

        thread = threading.Thread(target=build, name="widehouse-spark-launch", daemon=True)
        thread.start()
        return thread

    def clickhouse(self) -> clickhouse.ClickHouse:
        """The process's ClickHouse client, shared by every group's batches (calls are serialized)."""
        with self._client_lock:
            if self._client is None:
                client = clickhouse.connect(self.settings.clickhouse)
                ensure_clickhouse(client, self.catalog)
                self._client = client
            return self._client

    # -- queries -----------------------------------------------------------------------------
    def _start(self, group: GroupSpec) -> Any:
        from widehouse.source import source_options
        from widehouse.stream.spark.batch import BatchWriter
        from widehouse.stream.spark.handover import start_after
        from widehouse.stream.spark.source import register_wide_source, wide_source_name

        stream = self.settings.stream
        checkpoint = stream.checkpoint(group.name)
        self._check_checkpoint(group, checkpoint)
        writer = BatchWriter(
            spark=self.spark,
            catalog=self.catalog,
            group=group.name,
            topics=group.topics,
            app=stream.app,
            checkpoint=checkpoint,
            sinks=stream.sinks,
            delta=self.settings.delta,
            clickhouse=self.clickhouse,
            bronze=self.bronze,
            faults=self.options.faults,
            fired=self.fired_faults,
            after_commit=self.publishers.for_group(group.name, group.topics),
        )
        previous = self.writers.get(group.name)  # a restarted group's: its query has ended
        self.writers[group.name] = writer
        if previous is not None:
            previous.close()
        options = source_options(
            self.settings.pulsar,
            group.topics,
            appId=group_app_id(stream.app, group.name),
            startingOffsets=self.options.starting_offsets,
            maxMessagesPerTrigger=stream.max_messages,
            cutSlack=stream.cut_slack,
            # topics moved here by a replan continue where their old group committed them
            startAfter=start_after(self.spark, stream, group.name, group.topics),
        )
        # the group's own format: the pulsar source, transformed inside the reading tasks
        name = register_wide_source(
            self.spark, wide_source_name(stream.app, group.name, writer.plan), writer.plan
        )
        reader = self.spark.readStream.format(name).options(**options).load()
        plan_read_early(self.spark, reader)  # on a thread, while the query starts
        writer_stream = (
            reader.writeStream.queryName(f"{stream.app}:{group.name}")
            .option("checkpointLocation", checkpoint)
            .foreachBatch(writer)
        )
        if self.options.available_now:
            writer_stream = writer_stream.trigger(availableNow=True)
        else:
            writer_stream = writer_stream.trigger(processingTime=f"{stream.trigger_seconds} seconds")
        query = start_in_pool(self.spark, group.name, writer_stream.start)
        log.info("group %s: started (%d topics, checkpoint %s)", group.name, len(group.topics), checkpoint)
        return query

    def _check_checkpoint(self, group: GroupSpec, checkpoint: str) -> None:
        """Refuse a group whose sinks are ahead of its checkpoint (lost or reset; see stream.guard)."""
        from widehouse.stream.bronze import bronze_tables
        from widehouse.stream.guard import check_checkpoint, sink_positions
        from widehouse.stream.plan import TransformPlan
        from widehouse.stream.spark.checkpoint import last_planned_batch

        stream = self.settings.stream
        names = TransformPlan.for_topics(self.catalog, list(group.topics)).tables
        sinks = sink_positions(
            self.clickhouse() if "clickhouse" in stream.sinks else None,
            self.bronze if "delta" in stream.sinks else None,
            bronze_tables(self.catalog, self.settings.delta, names).values(),
            stream.app,
            group.name,
        )
        planned = last_planned_batch(self.spark, checkpoint)
        check_checkpoint(stream.app, group.name, checkpoint, planned, sinks)

    def start(self) -> None:
        from widehouse.stream.plan import TransformPlan

        topics = [t for g in self.groups for t in g.topics]
        plan = TransformPlan.for_topics(self.catalog, topics)  # every table the app's topics feed
        # the JVM starts (seconds) while the sinks' tables are checked: neither needs the other
        launch = None if self._spark is not None else self._launch_spark()
        try:
            if "clickhouse" in self.settings.stream.sinks:
                self.clickhouse()  # create or migrate the tables once, before any batch
            if "delta" in self.settings.stream.sinks:
                from widehouse.stream.bronze import bronze_tables

                tables = bronze_tables(self.catalog, self.settings.delta, plan.tables).values()
                for table in tables:
                    self.bronze.ensure(table)  # created by the stream's delta-rs writer, its only writer
                self._keep_up(list(tables))
            if launch is not None:  # the JVM still starts: the rest of the main thread's wait
                for module in QUERY_MODULES:
                    importlib.import_module(module)
        finally:
            if launch is not None:
                launch.join()
        root = self.settings.stream.checkpoint_root
        if "://" not in root:
            private_dir(Path(root))  # checkpoints hold offsets and state: this user's only
        self._started = time.monotonic()
        warm_workers(self.spark, plan, topics)  # in the background, while the queries plan their first batch
        self._start_all(self.groups)

    def _keep_up(self, tables: list[BronzeTable]) -> None:
        """Compact and vacuum ``tables`` in the background while the app runs (see stream.upkeep)."""
        delta = self.settings.delta
        if delta.bronze_upkeep_seconds > 0 and self.upkeep is None:
            self.upkeep = BronzeUpkeep(
                tables,
                delta.bronze_upkeep_seconds,
                delta.bronze_compact_files,
                self.bronze.storage_options,
                retention_s=delta.bronze_retention_seconds,
            )
            self.upkeep.start()

    def _start_all(self, groups: list[GroupSpec]) -> None:
        """Start the groups' queries side by side, each from a thread of its own.

        A query plans its first batch a second or so after its start: its source's planner is a
        Python process of its own, which starts, looks its topics up and asks for their last
        messages. Started one after the other, a later group planned its first batch up to a second
        after the first group, which ran alone meanwhile. Every query that started is in
        :attr:`queries` (so :meth:`stop` stops it) before the first failure is raised again.
        """
        if len(groups) == 1:
            self.queries[groups[0].name] = self._start(groups[0])
            return
        with ThreadPoolExecutor(len(groups), thread_name_prefix="widehouse-start") as starting:
            futures = {g.name: starting.submit(self._start, g) for g in groups}
        failures = []
        for name, future in futures.items():
            try:
                self.queries[name] = future.result()
            except Exception as exc:
                failures.append(exc)
                if len(failures) > 1:  # only the first is raised: the others are not lost
                    log.error("group %s: could not start: %s", name, exc)
        if failures:
            raise failures[0]

    def request_stop(self, *_: Any) -> None:
        """Signal handler: ask the run loop to stop (safe to call from any thread)."""
        log.info("stop requested")
        self._stop.set()

    def run(self, progress: Callable[[str], None] | None = None) -> int:
        """Run until every query is done (AvailableNow), the duration passes, or a stop request.

        ``progress`` is told :meth:`status` every half second (a terminal's status line). Returns
        0, or 1 when a group was given up (see :meth:`supervise`).
        """
        previous = (
            {sig: signal.signal(sig, self.request_stop) for sig in (signal.SIGTERM, signal.SIGINT)}
            if threading.current_thread() is threading.main_thread()
            else {}
        )
        deadline = time.monotonic() + self.options.duration_seconds if self.options.duration_seconds else None
        try:
            self.start()
            while (self.queries or self.book.pending) and not self._stop.is_set():
                if deadline is not None and time.monotonic() >= deadline:
                    break
                self.supervise()
                if progress is not None:
                    progress(self.status())
                time.sleep(0.5)
        finally:
            self.stop()
            self.publishers.close()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return 1 if self.failed else 0

    def status(self) -> str:
        """One line: messages read so far (and their rate), then each group's batches and lag."""
        seconds = time.monotonic() - self._started if self._started is not None else 0.0
        drained = sum(w.drained for w in self.writers.values())
        parts = [f"read {drained:,}", f"{drained / seconds:,.0f} msg/s" if seconds >= 1 else ""]
        for name in sorted(self.writers):
            writer = self.writers[name]
            if name in self.failed:
                state = "given up"
            elif name not in self.queries and name not in self.book.pending:
                state = "done"
            else:
                state = "lag ?" if writer.lag is None else f"lag {writer.lag:,}"
            parts.append(f"{name}: {writer.batches} batches, {state}")
        return "  ".join(p for p in parts if p)

    def supervise(self) -> dict[str, str]:
        """Check every query once: drop finished ones (AvailableNow), note committed batches (they
        reset the failure count), schedule a failed one's restart after its backoff, restart those
        whose time has come, give up a group after too many failures in a row. Returns the groups
        given up so far (group -> reason); also in :attr:`failed`."""
        now = time.monotonic()
        for name, query in list(self.queries.items()):
            batch = _committed_batch(query)
            if batch is not None and batch > self._batches.get(name, -1):
                self._batches[name] = batch
                self.book.committed(name)
            if query.isActive:
                continue
            error = query.exception()
            del self.queries[name]
            if error is not None:  # None: finished (AvailableNow)
                self._failed(name, error, now)
        for name in self.book.due(now):
            self.restarts[name] += 1
            group = next(g for g in self.groups if g.name == name)
            try:
                self.queries[name] = self._start(group)
            except CheckpointError as exc:  # refused for good (reset checkpoint): no retry helps
                log.error("%s", exc)
                self.failed[name] = str(exc)
            except Exception as exc:  # a sink still down while the group restarts: retry later
                self._failed(name, exc, time.monotonic())
        return self.failed

    def _failed(self, name: str, error: object, now: float) -> None:
        """Book a failure of group ``name``: schedule its restart after the backoff, or give it up."""
        decision = self.book.failed(name, error, now)
        if isinstance(decision, GiveUp):
            log.error("%s", decision.message)
            self.failed[name] = decision.message
        else:
            log.warning(
                "group %s failed (%s); restart %d from its checkpoint in %.1f s",
                name,
                error,
                decision.attempt,
                decision.at - now,
            )

    def stop(self) -> None:
        """Let the micro-batch each query is writing finish (up to the grace period), then stop it.

        A query is stopped as soon as its writer is idle, before it can start another batch; a
        batch interrupted after the grace period is not committed and is replayed by the next run.
        """
        grace_end = time.monotonic() + self.settings.stream.stop_grace_seconds
        for name, query in self.queries.items():
            writer = self.writers.get(name)
            if writer is not None:
                writer.idle.wait(timeout=max(0.0, grace_end - time.monotonic()))
            try:
                query.stop()
            except Exception as exc:  # stopping must not hide why we stop
                log.warning("group %s: stop failed: %s", name, exc)
        self.queries.clear()
        for writer in self.writers.values():
            writer.close()  # kept for status(): only the connections go
        if self.upkeep is not None:
            self.upkeep.stop()
            self.upkeep = None


def session_overrides(settings: Settings, groups: list[GroupSpec], folder: Path) -> dict[str, str]:
    """What a stream app's Spark session sets over the settings' conf.

    No tables by name (Delta by path, checkpoints through Hadoop): an in-memory catalog keeps a
    long-running stream off the local embedded Derby metastore, which admits one process and is the
    finalize and daily jobs' (they register silver tables). The groups' scheduler pools:
    :func:`scheduler_pools`.
    """
    return {"spark.sql.catalogImplementation": "in-memory", **scheduler_pools(settings, groups, folder)}


def scheduler_pools(settings: Settings, groups: list[GroupSpec], folder: Path) -> dict[str, str]:
    """The conf that declares ``groups``' scheduler pools (:func:`start_in_pool`) to a session about
    to start: an allocation file written to ``folder`` (Spark reads it once, as the session starts;
    the folder may go after), unless the user's conf names a file of its own: theirs is kept, and a
    group's pool it does not declare gets Spark's defaults. For any session a stream app runs in
    (its own, or one handed to it, as the demo's)."""
    if ALLOCATION_FILE in dict(settings.spark.extra_conf):
        return {}
    pools = folder / "pools.xml"
    pools.write_text(pools_xml([g.name for g in groups]))
    return {ALLOCATION_FILE: pools.as_uri()}


def pools_xml(groups: list[str]) -> str:
    """Spark's fair scheduler allocations: a pool per group, equal weights, its own jobs in order.

    Declared rather than left to Spark, which makes the same pools on first use but warns about
    each one as a configuration mistake."""
    entries = "".join(
        f"  <pool name={quoteattr(name)}><schedulingMode>FIFO</schedulingMode>"
        "<weight>1</weight><minShare>0</minShare></pool>\n"
        for name in groups
    )
    return f'<?xml version="1.0"?>\n<allocations>\n{entries}</allocations>\n'


def start_in_pool(spark: Any, pool: str, start: Callable[[], Any]) -> Any:
    """``start()`` (a query's start) with the calling thread in scheduler pool ``pool``; the thread's
    pool is put back afterwards.

    A query's thread inherits the pool, so every job of its batches (the reading tasks, run by
    ``foreachBatch``) is scheduled in it. Under ``spark.scheduler.mode=FAIR`` (Widehouse's default)
    the groups of one app then share the cores: without it, a group whose batch is planned a moment
    after another's waits for all of that batch's tasks (a 2-group drain was decided by its later,
    larger group). The app declares its groups' pools (:func:`pools_xml`); Spark makes a pool it was
    not told of on first use, with the same defaults and a warning. Under FIFO the pool is ignored.
    """
    context = spark.sparkContext
    before = context.getLocalProperty("spark.scheduler.pool")
    context.setLocalProperty("spark.scheduler.pool", pool)
    try:
        return start()
    finally:
        context.setLocalProperty("spark.scheduler.pool", before)


def _committed_batch(query: Any) -> int | None:
    """The id of the last batch the query committed, from its last progress (None if unknown).

    Spark reports a trigger's progress after it committed the batch; only triggers that ran a
    batch have an ``addBatch`` duration (an idle trigger reports the next, unplanned batch id).
    """
    try:
        progress = query.lastProgress
    except Exception:  # a query being torn down: nothing to learn this round
        return None
    if not progress or "addBatch" not in (progress.get("durationMs") or {}):
        return None
    return int(progress["batchId"])


def stream(
    args: argparse.Namespace, settings: Settings, progress: Callable[[str], None] | None = None
) -> int:
    """The use case of ``widehouse stream`` and ``stream_wide.py``: run the groups that the parsed
    :func:`widehouse.stream.options.add_arguments` ask for until done; an exit code."""
    groups, options = resolve_run(args, settings.state_dir)
    return run_stream(settings, groups, options, progress)


def run_stream(
    settings: Settings,
    groups: list[GroupSpec],
    options: RunOptions,
    progress: Callable[[str], None] | None = None,
) -> int:
    """Run the groups until done; the library entry point of ``stream_wide.py`` / ``widehouse stream``.

    ``progress``: see :meth:`StreamApp.run`."""
    return StreamApp(settings, groups, options).run(progress)

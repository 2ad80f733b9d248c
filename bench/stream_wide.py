"""Streaming wide-table job: events/s into both sinks, freshness, union vs join, 1-1,000 topics.

Everything runs on this machine with the local services co-located (Pulsar, HBase idle, Spark
``local[*]``, the local ClickHouse service over HTTP, Delta on local disk). Parts:

``throughput``  publish N events of the demo catalog (42 topics, 1% bad, 0.5% late), then one app
                (one slot group) drains them into ClickHouse and Delta; events/s on the wall clock
                and inside micro-batches, events/s per core.
``freshness``   publish at a fixed rate for S seconds while the app runs with its trigger; freshness
                (publish -> committed in both sinks) p50 / p95, and whether it kept up.
``join``        the same events two ways in ClickHouse: Widehouse's union (parse, pre-aggregate per
                (key, hour), insert partial rows, merged view) versus what a user would try without
                it: one narrow table per topic, the wide row assembled at query time by joining the
                topics on (uid, hour). Both are checked against the generator's expected rows.
``topics``      1 vs 100 vs 1,000 topics in one app (a synthetic catalog), same total events.

    python -m bench stream_wide [--parts throughput,freshness,join,topics] [--events 150000] [--budget 50000]
                                [--rate 1000] [--seconds 90] [--topics 1,100,1000] [--topic-events 30000]
                                [--log-batches]
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from bench.common import drop_databases, drop_tenants, machine, save, table

CORES = os.cpu_count() or 1


# -------------------------------------------------------------------------------- environment
def stop_spark() -> None:
    """Stop this process's Spark session, if it has one, with its Python workers.

    The workers keep the source's readers between batches. Once the bench drops its tenants, kept
    readers would look their deleted topics up again and again, an error line each time, until the
    source's janitor closes them (up to 15 s) or the process exits."""
    if "pyspark.sql" not in sys.modules:
        return
    from pyspark.errors import PySparkRuntimeError
    from pyspark.sql import SparkSession

    try:
        session = SparkSession.active()  # the thread's, else the process's default
    except PySparkRuntimeError:  # none
        return
    session.stop()


def close_readers() -> None:
    """Close the Pulsar readers this process keeps (``bench read_transform`` reads in-process), so
    none looks the bench's topics up again once their tenants are dropped (an error line each time,
    until the janitor's next sweep)."""
    if "widehouse.source.reader" in sys.modules:
        from widehouse.source.reader import close_kept

        close_kept()


class Bench:
    """One process, one Spark session; each part in its own ClickHouse database and folders.

    ``owns_spark``: this process is the benchmark's own (``python -m bench``), so :meth:`close`
    stops its Spark session first (:func:`stop_spark`); a test's process keeps its shared one."""

    def __init__(self, root: Path, *, owns_spark: bool = False) -> None:
        self.root = root
        self.owns_spark = owns_spark
        self.suffixes: set[str] = set()
        """Tenant suffixes published to (dropped by :meth:`close`)."""
        self.databases: set[str] = set()
        """ClickHouse databases the parts wrote (dropped by :meth:`close`)."""

    def close(self) -> None:
        """Delete the tenants this run published to, its ClickHouse databases and its state folder.

        The ClickHouse service is shared and long-lived: every database a run left behind (333 after
        two days of benchmarks, ~3,300 parts) kept its tables and their background work (merges,
        cleanups) in the service that the next runs measure."""
        from widehouse.settings import load_settings

        settings = load_settings()
        if self.owns_spark:
            stop_spark()
        close_readers()
        dropped = drop_tenants(settings.pulsar, sorted(self.suffixes))
        if dropped:
            print(f"dropped {dropped} bench tenants from the broker")
        gone = drop_databases(settings.clickhouse, sorted(self.databases))
        if gone:
            print(f"dropped {gone} bench databases from ClickHouse")
        shutil.rmtree(self.root, ignore_errors=True)

    def settings(self, part: str, schemas: Path | None = None, **env: str) -> Any:
        from widehouse.settings import load_settings

        return load_settings(self.environ(part, schemas, **env))

    def environ(self, part: str, schemas: Path | None = None, **env: str) -> dict[str, str]:
        """The environment of a part's settings (:meth:`settings`), for a process of its own."""
        # a database per run and part: the ClickHouse service is shared (other runs, other checkouts),
        # and a sink that already holds this app's batches would (rightly) refuse a fresh checkpoint
        values = {
            **os.environ,
            "WIDEHOUSE_STATE_DIR": str(self.root / "state"),
            "WIDEHOUSE_CLICKHOUSE_DATABASE": self._database(f"bench_{part}_{env['suffix']}"),
            "WIDEHOUSE_DELTA_ROOT": str(self.root / part / "delta"),
            "WIDEHOUSE_STREAM_CHECKPOINT_ROOT": str(self.root / part / "checkpoints"),
            "WIDEHOUSE_TENANT_SUFFIX": self._record(env.pop("suffix")),
            **env,
        }
        if schemas is not None:
            values["WIDEHOUSE_SCHEMAS_DIR"] = str(schemas)
        return values

    def _record(self, suffix: str) -> str:
        self.suffixes.add(suffix)
        return suffix

    def _database(self, name: str) -> str:
        self.databases.add(name)
        return name


def _suffix() -> str:
    return "b" + uuid.uuid4().hex[:7]


def _run_app(settings: Any, topics: list[str], available_now: bool = True, until: Any = None) -> Any:
    from widehouse.stream.options import GroupSpec, RunOptions
    from widehouse.stream.spark.job import StreamApp

    app = StreamApp(settings, [GroupSpec("g001", tuple(topics))], RunOptions(available_now=available_now))
    if available_now:
        code = app.run()
        assert code == 0, "the stream failed"
        return app
    app.start()
    try:
        until(app)
    finally:
        app.stop()
        app.publishers.close()
    return app


def _progress(app: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rows = list(
        app.clickhouse().query("SELECT * FROM stream_progress FINAL ORDER BY batch_id, topic").named_results()
    )
    return [r for r in rows if r["topic"] == "*"], [r for r in rows if r["topic"] != "*"]


def _check(app: Any, manifest: Any) -> str:
    from widehouse.generator.manifest import diff_rows

    rows = app.clickhouse().query("SELECT * FROM user_hourly_merged").named_results()
    problems = diff_rows(manifest.expected_rows("user_hourly"), {(r["uid"], r["hour"]): r for r in rows})
    return "exact" if not problems else f"{len(problems)} differences"


# -------------------------------------------------------------------------------- parts
def part_throughput(bench: Bench, events: int, budget: int) -> dict[str, Any]:
    from widehouse.generator.options import GenerateOptions
    from widehouse.generator.run import generate
    from widehouse.stream.measure import figures

    suffix = _suffix()
    settings = bench.settings("throughput", suffix=suffix, WIDEHOUSE_STREAM_MAX_MESSAGES=str(budget))
    manifest = generate(
        settings, GenerateOptions(count=events, rate=0, users=5000, tenant_suffix=suffix, create_topics=True)
    )
    topics = sorted(manifest.published_name(t) for t in manifest.topics)
    app = _run_app(settings, topics)
    run = figures(*_progress(app))
    return {
        "events": run.messages,
        "batches": run.batches,
        "wall_s": run.wall_seconds,
        "wall_rate": run.wall_rate,
        "batch_rate": run.batch_rate,
        "per_core": run.batch_rate / CORES,
        "check": _check(app, manifest),
    }


def part_freshness(bench: Bench, rate: float, seconds: float, trigger: float = 5.0) -> dict[str, Any]:
    """Publish at ``rate`` for ``seconds`` while an app with a ``trigger``-second processing-time
    trigger runs; freshness samples are publish -> committed in both sinks. The trigger is the
    operator's freshness knob (``WIDEHOUSE_STREAM_TRIGGER_SECONDS``): an event waits up to one
    interval for its batch to start, so p95 >= ~0.95 x trigger + the batch's own time."""
    from widehouse.generator.options import GenerateOptions
    from widehouse.generator.run import generate
    from widehouse.stream.measure import figures, freshness

    suffix = _suffix()
    settings = bench.settings("freshness", suffix=suffix, WIDEHOUSE_STREAM_TRIGGER_SECONDS=f"{trigger:g}")
    # topics first (tiny burst), so the app can subscribe before the timed traffic starts
    burst = generate(
        settings,
        GenerateOptions(count=200, rate=0, users=5000, tenant_suffix=suffix, create_topics=True, seed=2),
    )
    from widehouse.catalog import load_catalog

    topics = [str(t.name) for t in load_catalog(settings.schemas_dir).relocated(suffix).topics]

    def publish_then_drain(app: Any) -> None:
        # inline, not in a thread: a generator that raises ends the part (and stops the app) at once
        timed = generate(
            settings,
            GenerateOptions(duration_s=seconds, rate=rate, users=5000, tenant_suffix=suffix, seed=3),
        )
        sent = burst.counts().sent + timed.counts().sent
        # drained when the committed batches read every message sent. (Waiting for a batch planned
        # after the generator returned waited out the deadline whenever the last batch had been
        # planned after the last send but before the generator's return: no data, no next batch.)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            groups, _ = _progress(app)
            if sum(g["rows_in"] for g in groups) >= sent:
                return
            time.sleep(0.5)
        print(f"freshness: the app had not read all {sent:,} messages sent after 300 s")

    app = _run_app(settings, topics, available_now=False, until=publish_then_drain)
    groups, topic_rows = _progress(app)
    timed = [g for g in groups if g["batch_id"] > 0]  # batch 0 carried the set-up burst
    run = figures(timed, [r for r in topic_rows if r["batch_id"] > 0])
    return {
        "rate": rate,
        "seconds": seconds,
        "trigger_s": trigger,
        "events": run.messages,
        "batches": run.batches,
        "p50": run.freshness_p50,
        "p95": run.freshness_p95,
        "max_lag": max((g["lag"] for g in timed), default=0),
        "mean_batch_s": run.batch_seconds / max(run.batches, 1),
        "samples": freshness([r for r in topic_rows if r["batch_id"] > 0]),
    }


def part_join(bench: Bench, events: int) -> dict[str, Any]:
    from bench._stream_join import compare

    settings = bench.settings("join", suffix=_suffix())
    return compare(settings, events)


def part_topics(bench: Bench, counts: list[int], events: int) -> list[dict[str, Any]]:
    from bench._stream_join import synthetic_catalog
    from widehouse.generator.options import GenerateOptions
    from widehouse.generator.run import generate
    from widehouse.stream.measure import figures

    rows = []
    for count in counts:
        schemas = synthetic_catalog(bench.root / f"catalog-{count}", count)
        suffix = _suffix()
        settings = bench.settings(
            f"topics{count}",
            schemas=schemas,
            suffix=suffix,
            # three batches: a floor of a third would leave a batch of the remainder (one message
            # of 100,000), ~10 % of the run spent planning and committing it
            WIDEHOUSE_STREAM_MAX_MESSAGES=str(max(-(-events // 3), 1000)),
        )
        t0 = time.monotonic()
        manifest = generate(
            settings,
            GenerateOptions(
                count=events,
                rate=0,
                users=2000,
                tenant_suffix=suffix,
                create_topics=True,
                bad_rate=0,
                late_rate=0,
            ),
        )
        publish_s = time.monotonic() - t0
        topics = sorted(manifest.published_name(t) for t in manifest.topics)
        t0, started_at = time.monotonic(), time.time()
        app = _run_app(settings, topics)
        app_s = time.monotonic() - t0
        groups, topic_rows = _progress(app)
        busy = [g for g in groups if g["rows_in"]]
        durations = [g["duration_ms"] / 1000 for g in busy]
        run = figures(busy, topic_rows)
        rows.append(
            {
                "topics": len(topics),
                "events": sum(g["rows_in"] for g in busy),
                "batches": len(busy),
                "publish_s": publish_s,
                "app_s": app_s,
                "first_batch_s": durations[0] if durations else 0.0,
                "later_batch_s": sum(durations[1:]) / max(len(durations) - 1, 1)
                if len(durations) > 1
                else 0.0,
                "rate": sum(g["rows_in"] for g in busy) / max(sum(durations), 1e-3),
                # issue 28's measure: first batch planned -> last commit; start-up apart
                "wall_rate": run.wall_rate,
                "startup_s": min(g["batch_time"].timestamp() for g in groups) - started_at if groups else 0.0,
                # after the first batch (cold Python workers, a new reader on every partition)
                "later_rate": sum(g["rows_in"] for g in busy[1:]) / max(sum(durations[1:]), 1e-3),
                "check": _check_synthetic(app, manifest),
            }
        )
    return rows


def _check_synthetic(app: Any, manifest: Any) -> str:
    return _check(app, manifest) if "user_hourly" in manifest.tables() else "-"


# -------------------------------------------------------------------------------- main
def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench stream_wide", description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="throughput,freshness,join,topics")
    parser.add_argument("--events", type=int, default=150_000)
    parser.add_argument(
        "--budget", type=int, default=50_000, help="throughput part: messages per micro-batch"
    )
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--seconds", type=float, default=90.0)
    parser.add_argument("--trigger", type=float, default=5.0, help="freshness: trigger seconds")
    parser.add_argument("--topics", default="1,100,1000")
    parser.add_argument("--topic-events", type=int, default=30_000)
    parser.add_argument("--keep", action="store_true", help="keep the bench state dir")
    parser.add_argument(
        "--log-batches", action="store_true", help="log each micro-batch with its per-phase timings"
    )
    args = parser.parse_args(argv)
    if args.log_batches:
        import logging

        logging.basicConfig(format="%(asctime)s %(name)s %(message)s")
        logging.getLogger("widehouse.stream").setLevel(logging.INFO)
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    root = Path(tempfile.mkdtemp(prefix="widehouse-bench-stream-"))
    bench = Bench(root, owns_spark=True)
    results: dict[str, Any] = {"parts": parts}
    print(f"machine: {machine()}; state in {root}")
    try:
        if "throughput" in parts:
            r = results["throughput"] = part_throughput(bench, args.events, args.budget)
            print(
                table(
                    f"\nthroughput: {r['events']:,} demo-catalog events (42 topics), one app, "
                    "ClickHouse + Delta",
                    (
                        "events",
                        "batches",
                        "wall s",
                        "events/s (wall)",
                        "events/s (in batches)",
                        "per core",
                        "check",
                    ),
                    [
                        (
                            r["events"],
                            r["batches"],
                            r["wall_s"],
                            r["wall_rate"],
                            r["batch_rate"],
                            r["per_core"],
                            r["check"],
                        )
                    ],
                )
            )
        if "freshness" in parts:
            r = results["freshness"] = part_freshness(bench, args.rate, args.seconds, args.trigger)
            print(
                table(
                    f"\nfreshness at a fixed {r['rate']:g} events/s for {r['seconds']:g}s "
                    f"(trigger {r['trigger_s']:g}s)",
                    ("events", "batches", "mean batch s", "p50 s", "p95 s", "max lag"),
                    [(r["events"], r["batches"], r["mean_batch_s"], r["p50"], r["p95"], r["max_lag"])],
                )
            )
        if "join" in parts:
            r = results["join"] = part_join(bench, min(args.events, 60_000))
            print(
                table(
                    f"\nunion vs join, {r['events']:,} events of 42 topics -> user_hourly "
                    f"({r['rows']:,} wide rows), in ClickHouse",
                    ("approach", "ingest s", "rows stored", "wide query s", "point query ms", "check"),
                    [
                        (
                            "union (Widehouse)",
                            r["union_ingest_s"],
                            r["union_rows"],
                            r["union_query_s"],
                            r["union_point_ms"],
                            r["union_check"],
                        ),
                        (
                            "per-topic tables + join",
                            r["join_ingest_s"],
                            r["join_rows"],
                            r["join_query_s"],
                            r["join_point_ms"],
                            r["join_check"],
                        ),
                    ],
                )
            )
            print(
                f"wide query: join / union = {r['join_query_s'] / max(r['union_query_s'], 1e-6):.1f}x; "
                f"point query: {r['join_point_ms'] / max(r['union_point_ms'], 1e-6):.1f}x"
            )
        if "topics" in parts:
            counts = [int(c) for c in args.topics.split(",")]
            rows = results["topics"] = part_topics(bench, counts, args.topic_events)
            print(
                table(
                    f"\ntopics in one app: {args.topic_events:,} events spread evenly, "
                    "drained with AvailableNow",
                    (
                        "topics",
                        "events",
                        "batches",
                        "first batch s",
                        "later batch s",
                        "events/s in batches",
                        "app s",
                        "check",
                    ),
                    [
                        (
                            r["topics"],
                            r["events"],
                            r["batches"],
                            r["first_batch_s"],
                            r["later_batch_s"],
                            r["rate"],
                            r["app_s"],
                            r["check"],
                        )
                        for r in rows
                    ],
                )
            )
    finally:
        print(f"\nsaved {save('stream_wide', results)}")
        if not args.keep:
            bench.close()
    return 0


def _series(groups_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each batch that read rows: its group, commit time, rows and seconds (the plots' points)."""
    return [
        {
            "group": g["group"],
            "t": g["committed_at"].timestamp(),
            "rows": g["rows_in"],
            "s": g["duration_ms"] / 1000,
        }
        for g in groups_rows
        if g["rows_in"]
    ]


def process_drain(
    bench: Bench, name: str, suffix: str, topics: list[str], groups: int, *, part: str = "drain", **env: str
) -> dict[str, Any]:
    """Drain ``topics`` (already published) as a job does: a ``widehouse stream --available-now``
    process of its own, its ``groups`` slot groups from a plan file.

    Its start-up is issue 28's own measure of it: the process's start (before the interpreter, its
    imports and settings) to the first batch planned; :func:`drain_app`'s starts at ``app.start``
    in a process that imported everything already. Figures come from the progress rows the process
    wrote (the part's ClickHouse database); the run's output tail is raised when it fails."""
    import subprocess

    from widehouse import clickhouse
    from widehouse.planner import save_plan
    from widehouse.planner.model import Group, Plan
    from widehouse.settings import load_settings
    from widehouse.stream.measure import figures

    values = bench.environ(part, None, suffix=suffix, WIDEHOUSE_STREAM_APP=name, **env)
    split = [tuple(topics[i::groups]) for i in range(groups)]
    plan = Plan(
        groups=tuple(Group(f"g{i + 1:03d}", t, 1.0, 1) for i, t in enumerate(split)),
        partitions=dict.fromkeys(topics, 1),
    )
    path = save_plan(plan, bench.root / part / f"plan-{name}.json")
    command = [
        sys.executable,
        "-m",
        "widehouse",
        "stream",
        "--plan",
        str(path),
        "--all-groups",
        "--available-now",
    ]
    started = time.monotonic()
    started_at = time.time()
    done = subprocess.run(command, env=values, capture_output=True, text=True, timeout=900, check=False)
    app_s = time.monotonic() - started
    if done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(command[1:])} exited {done.returncode}:\n{(done.stdout + done.stderr)[-3000:]}"
        )
    client = clickhouse.connect(load_settings(values).clickhouse)
    holder = SimpleNamespace(clickhouse=lambda: client)  # what _progress and _check ask an app for
    groups_rows, topic_rows = _progress(holder)
    mine = [g for g in groups_rows if g["app"] == name]
    run = figures(mine, [r for r in topic_rows if r["app"] == name])
    return {
        "app": name,
        "events": run.messages,
        "batches": run.batches,
        "app_s": app_s,
        "startup_s": min(g["batch_time"].timestamp() for g in mine) - started_at if mine else 0.0,
        "gap_s": median_gap(mine),
        "batch_rate": run.batch_rate,
        "wall_rate": run.wall_rate,
        "timings": [],
        "series": _series(mine),
        "app_obj": holder,
    }


def drain_app(
    bench: Bench, name: str, suffix: str, topics: list[str], groups: int, *, part: str = "drain", **env: str
) -> dict[str, Any]:
    """Drain ``topics`` (already published) with a new app of ``groups`` slot groups.

    Apps of the same ``part`` share a ClickHouse database (wide tables sum every app's partials):
    give an app whose rows are checked a part of its own."""
    from widehouse.stream.measure import figures
    from widehouse.stream.options import GroupSpec, RunOptions
    from widehouse.stream.spark.job import StreamApp

    settings = bench.settings(part, None, suffix=suffix, WIDEHOUSE_STREAM_APP=name, **env)
    split = [tuple(topics[i::groups]) for i in range(groups)]
    app = StreamApp(
        settings, [GroupSpec(f"g{i + 1:03d}", t) for i, t in enumerate(split)], RunOptions(available_now=True)
    )
    writers: dict[str, Any] = {}
    started = time.monotonic()
    started_at = time.time()  # the JVM starts in ``start`` (the first app of the process)
    app.start()
    writers.update(app.writers)
    try:
        while app.queries:
            app.supervise()
            writers.update(app.writers)
            time.sleep(0.2)
    finally:
        app.stop()
        app.publishers.close()  # as ``StreamApp.run`` does: no producer outlives the bench's tenants
    assert not app.failed, app.failed
    groups_rows, topic_rows = _progress(app)
    mine = [g for g in groups_rows if g["app"] == name]
    run = figures(mine, [r for r in topic_rows if r["app"] == name])
    timings = [t for w in writers.values() for t in w.timings if t["rows_in"]]
    return {
        "app": name,
        "events": run.messages,
        "batches": run.batches,
        "app_s": time.monotonic() - started,
        "startup_s": min(g["batch_time"].timestamp() for g in mine) - started_at if mine else 0.0,
        "gap_s": median_gap(mine),
        "batch_rate": run.batch_rate,
        "wall_rate": run.wall_rate,
        "median_batch_s": statistics.median(g["duration_ms"] / 1000 for g in mine if g["rows_in"])
        if mine
        else 0,
        "timings": timings,
        "series": _series(mine),
        "app_obj": app,
    }


def median_gap(group_rows: list[dict[str, Any]]) -> float:
    """Median seconds from a batch's commit to the planning of its group's next batch."""
    gaps = []
    for group in {g["group"] for g in group_rows}:
        mine = sorted((g for g in group_rows if g["group"] == group), key=lambda g: g["batch_id"])
        gaps += [(b["batch_time"] - a["committed_at"]).total_seconds() for a, b in itertools.pairwise(mine)]
    return statistics.median(gaps) if gaps else 0.0

"""The demo (``make demo`` / ``widehouse demo``): the whole streaming path on the local defaults.

1. bring the local services up; load the catalog;
2. plan slot groups from the catalog's traffic mix at the demo rate, create the topics with the
   planned partitions;
3. publish realistic traffic (bad input and late events included) for a couple of minutes while
   the streaming queries of every slot group run in this process (they write to the local
   ClickHouse service, as the batch jobs and analysts read it);
4. once Pulsar is drained, stop the queries and print analyst queries from ClickHouse, the same
   totals from Delta, a check of both against the generator's manifest, and measured throughput
   and freshness.

Re-running the demo resets what the previous run made (its topics, checkpoints and tables) so the
manifest check stays exact; it refuses to do that anywhere but on the local defaults.
"""

from __future__ import annotations

import datetime as dt
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from widehouse.batch.spark import silver_path
from widehouse.catalog import Catalog, load_catalog
from widehouse.clickhouse.analyst import view_names
from widehouse.clickhouse.ddl import table_names
from widehouse.contracts.identity import OFFLINE_DATABASE
from widehouse.contracts.tables import (
    BATCH_SHAPES,
    COUNTS,
    GROUP_ROW,
    LATE,
    MARKS,
    PROGRESS,
    QUARANTINE,
    SIDE_SHAPES,
)
from widehouse.demo.result import DemoResult, Section
from widehouse.errors import ConfigError, WidehouseError
from widehouse.generator.manifest import Manifest, diff_rows
from widehouse.generator.options import GenerateOptions
from widehouse.generator.run import generate
from widehouse.planner import Plan, TopicTraffic, plan, save_plan
from widehouse.planner.apply import apply_partitions
from widehouse.pulsar import PulsarAdmin
from widehouse.services import ServiceManager
from widehouse.settings import PlannerSettings, Settings
from widehouse.stream.measure import figures
from widehouse.stream.options import GroupSpec, RunOptions
from widehouse.stream.tables import delta_partials, delta_side

Say = Callable[[str], None]
ACTIVITY = ("page_views", "clicks", "searches", "live_enters", "videos_played", "messages_sent", "gifts_sent")
AVERAGE_PAYLOAD_BYTES = 150


@dataclass(frozen=True)
class DemoOptions:
    rate: float = 1500.0
    """Messages per second published over all topics."""
    seconds: float = 120.0
    users: int = 5000
    seed: int = 7
    groups: int = 2
    """Slot groups the plan should come out with (the slot capacity is derived from it)."""
    drain_timeout: float = 600.0
    """After publishing ends, how long the streams may take to catch up."""


def demo_session(settings: Settings, groups: list[GroupSpec]) -> Any:
    """One session for the stream and the batch part after it: with Hive (the offline tables, the
    silver tables' registration), which a stream job's own session goes without, and the stream
    groups' scheduler pools declared, as a stream job's own session has them."""
    from widehouse.spark.session import build_session
    from widehouse.stream.spark.job import scheduler_pools

    with tempfile.TemporaryDirectory(prefix="widehouse-pools-") as folder:
        return build_session(settings, "widehouse-demo", scheduler_pools(settings, groups, Path(folder)))


def run_demo(settings: Settings, options: DemoOptions, say: Say = print) -> DemoResult:
    """Run the demo; progress lines go to ``say``, findings come back as a :class:`DemoResult`."""
    _require_local(settings)
    t_start = time.monotonic()
    say("== Widehouse demo: Pulsar -> slot-group streams -> ClickHouse + Delta ==")
    services = ServiceManager(settings.local, report=lambda m: say(f"  {m}"))
    if not services.up_missing():  # whoever runs the ones that answer already
        say("  local services already running")
    catalog = load_catalog(settings.schemas_dir)
    suffix = settings.stream.tenant_suffix
    if suffix:  # the demo's topics under tenants `<tenant>-<suffix>` (tests, a second demo)
        catalog = catalog.relocated(suffix)
    demo_dir = settings.state_dir / "demo"
    _reset(settings, catalog, demo_dir, say)

    the_plan = _plan(settings, catalog, options)
    save_plan(the_plan, settings.state_dir / "plan.json")
    apply_partitions(settings.pulsar, the_plan)
    say(
        f"plan: {len(the_plan.groups)} slot groups over {len(the_plan.topics)} topics "
        f"({', '.join(f'{g.name}: {len(g.topics)} topics' for g in the_plan.groups)}), "
        f"saved to {settings.state_dir / 'plan.json'}"
    )

    from widehouse.stream.spark.job import StreamApp

    groups = [GroupSpec(g.name, tuple(g.topics)) for g in the_plan.groups]
    spark = demo_session(settings, groups)
    app = StreamApp(settings, groups, RunOptions(starting_offsets="earliest"), spark=spark)
    app.start()
    say(
        f"streams running ({app.settings.stream.trigger_seconds:g}s trigger); publishing "
        f"~{options.rate:g} msg/s for {options.seconds:g}s ..."
    )

    publisher = _Publisher(settings, options, demo_dir / "manifest.json")
    publisher.start()
    try:
        _watch(app, publisher, options, say)
    finally:
        app.stop()
    if publisher.error is not None:
        raise WidehouseError(f"the generator failed: {publisher.error}") from publisher.error
    manifest = publisher.manifest
    assert manifest is not None
    result = _report(app, catalog, manifest)
    say("batch: finalizing the demo's hours (forced: the watermark is up to 2 h away) ...")
    _batch(app, catalog, manifest, result, say)
    result.figures["seconds"] = round(time.monotonic() - t_start, 1)
    result.notes.append(_next_steps(settings))
    return result


# -- set-up --------------------------------------------------------------------------------
def _require_local(settings: Settings) -> None:
    loopback = {"127.0.0.1", "localhost", "::1"}
    pulsar_host = urlsplit(settings.pulsar.admin_url).hostname
    clickhouse_host = urlsplit(settings.clickhouse.dsn).hostname
    if pulsar_host not in loopback or not (settings.clickhouse.embedded or clickhouse_host in loopback):
        raise ConfigError(
            "the demo resets its topics and tables, so it runs only on the local defaults (Pulsar and "
            "ClickHouse on loopback); unset WIDEHOUSE_PULSAR_* / WIDEHOUSE_CLICKHOUSE_DSN"
        )


def _reset(settings: Settings, catalog: Catalog, demo_dir: Path, say: Say) -> None:
    """Remove what a previous demo run made: topics, checkpoints, stream and batch tables.

    The topics go even when this state dir has never run the demo: the broker may hold them from a
    demo of another checkout, and the streams read from the earliest message.
    """
    say("resetting the demo's topics, checkpoints and tables")
    demo_dir.mkdir(parents=True, exist_ok=True)
    with PulsarAdmin(settings.pulsar) as admin:
        for topic in catalog.topics:
            admin.delete_topic(topic.name)
    shutil.rmtree(Path(settings.stream.checkpoint_root) / settings.stream.app, ignore_errors=True)
    from widehouse import clickhouse

    client = clickhouse.connect(settings.clickhouse)
    client.drop(view_names(catalog.sql_dir))
    for table in catalog.wide_tables:
        names = table_names(table)
        client.drop([names.view, names.merged, names.final, names.partial])
        shutil.rmtree(delta_partials(settings.delta, table.name), ignore_errors=True)
        shutil.rmtree(silver_path(settings.delta, table.name), ignore_errors=True)
    # the batch layer's records go with the tables they describe: a publication kept past its ledger
    # (or its staged rows) looks prepared and uncommitted to the next run, which then cannot roll it
    # forward (a second demo on the same day failed so at the daily publish)
    client.drop([*SIDE_SHAPES, COUNTS, MARKS, *(shape.name for shape in BATCH_SHAPES)])
    for side in SIDE_SHAPES:
        shutil.rmtree(delta_side(settings.delta, side), ignore_errors=True)


def _plan(settings: Settings, catalog: Catalog, options: DemoOptions) -> Plan:
    """Slot groups for the catalog's traffic mix at the demo rate, sized to ``options.groups``."""
    total_weight = sum(t.traffic.weight for t in catalog.topics)
    traffic = []
    for topic in catalog.topics:
        rate = options.rate * topic.traffic.weight / total_weight
        traffic.append(
            TopicTraffic(
                str(topic.name), rate, rate * AVERAGE_PAYLOAD_BYTES, partitions=topic.traffic.partitions
            )
        )
    base = settings.planner
    load = sum(t.load(base) for t in traffic)
    capacity = load / (options.groups * base.target_fill) * 1.05
    planner = PlannerSettings(
        slot_capacity=capacity,
        message_cost=base.message_cost,
        target_fill=base.target_fill,
        isolation=base.isolation,
        partition_capacity=capacity / 4,
        max_partitions=8,
    )
    return plan(traffic, planner)


class _Publisher(threading.Thread):
    """The generator, in the background, for the demo's duration."""

    def __init__(self, settings: Settings, options: DemoOptions, manifest_path: Path) -> None:
        super().__init__(name="demo-generator", daemon=True)
        self.settings = settings
        self.options = options
        self.manifest_path = manifest_path
        self.manifest: Manifest | None = None
        self.error: BaseException | None = None
        self.finished_at: float | None = None

    def run(self) -> None:
        try:
            self.manifest = generate(
                self.settings,
                GenerateOptions(
                    duration_s=self.options.seconds,
                    rate=self.options.rate,
                    users=self.options.users,
                    seed=self.options.seed,
                    manifest_path=self.manifest_path,
                    tenant_suffix=self.settings.stream.tenant_suffix,
                ),
            )
        except BaseException as exc:  # reported by the main thread
            self.error = exc
        finally:
            self.finished_at = time.time()


def caught_up(rows: Sequence[Sequence[Any]], groups: int, finished: float, sent: int | None) -> bool:
    """Whether the streams have read all that was published, from each group's progress ``rows``
    (group, lag of its last batch, its last batch's planning time, messages read, bad, late).

    Every group must report and its last batch must have left no lag. That alone is not enough: a
    batch planned before publishing ended may have missed what came after it. So either every
    group's last batch was planned after publishing ended (``finished``, epoch seconds), or the
    groups together read every message the publisher sent (``sent``). Without the second, a last
    batch planned between the last message and the publisher's end (it still writes its manifest)
    read everything, and no batch followed it: the demo waited for its drain timeout (10 minutes)
    for nothing."""
    if len(rows) != groups or any(row[1] != 0 for row in rows):
        return False
    planned_after = all(row[2].replace(tzinfo=dt.UTC).timestamp() > finished for row in rows)
    return planned_after or (sent is not None and sum(row[3] for row in rows) >= sent)


def _watch(app: Any, publisher: _Publisher, options: DemoOptions, say: Say) -> None:
    """Print progress every ~10 s; return once publishing ended and every group caught up."""
    client = app.clickhouse()
    deadline: float | None = None
    while True:
        time.sleep(10)
        failed = app.supervise()  # restarts a failed query from its checkpoint, up to the limit
        if failed:
            name, error = next(iter(failed.items()))
            raise WidehouseError(f"slot group {name} stopped after {app.restarts[name]} restarts: {error}")
        rows = client.query(
            f"SELECT group, argMax(lag, batch_id), max(batch_time), sum(rows_in), sum(bad), sum(late) "
            f"FROM {PROGRESS} WHERE topic = '{GROUP_ROW}' AND app = {{app:String}} GROUP BY group",
            parameters={"app": app.settings.stream.app},
        ).result_rows
        done = sum(r[3] for r in rows)
        lag = sum(r[1] for r in rows)
        say(
            f"  processed {done:,} messages ({sum(r[4] for r in rows):,} quarantined, "
            f"{sum(r[5] for r in rows):,} late); lag {lag:,}"
        )
        if publisher.is_alive():
            continue
        if publisher.error is not None:
            return
        finished = publisher.finished_at or time.time()
        deadline = deadline or time.monotonic() + options.drain_timeout
        sent = publisher.manifest.counts().sent if publisher.manifest is not None else None
        if caught_up(rows, len(app.groups), finished, sent):
            return
        if time.monotonic() > deadline:
            say("  the streams did not catch up in time; reporting what they wrote")
            return


# -- the report ----------------------------------------------------------------------------
def _report(app: Any, catalog: Catalog, manifest: Manifest) -> DemoResult:
    from pyspark.sql import functions as F  # noqa: N812

    from widehouse.stream.spark.readback import merged_rows

    client = app.clickhouse()
    settings = app.settings
    result = DemoResult()
    hourly = catalog.table("user_hourly")
    activity = [c for c in ACTIVITY if hourly.has_column(c)]
    activity_sql = " + ".join(f"`{c}`" for c in activity)

    top = client.query(
        f"SELECT uid, hour, {activity_sql} AS activity, {', '.join(activity[:4])} FROM user_hourly "
        "WHERE hour = (SELECT max(hour) FROM user_hourly) ORDER BY activity DESC, uid LIMIT 10"
    )
    result.sections.append(
        Section(
            "ClickHouse: top users by activity in the latest hour (view wh.user_hourly)",
            tuple(top.column_names),
            [tuple(r) for r in top.result_rows],
        )
    )
    per_topic = client.query(
        f"SELECT topic, toStartOfHour(batch_time) AS hour, sum(rows_in) AS events, sum(rows_out) AS wide, "
        f"sum(bad) AS quarantined, sum(late) AS late FROM {PROGRESS} WHERE topic != '{GROUP_ROW}' "
        "GROUP BY topic, hour ORDER BY events DESC LIMIT 12"
    )
    result.sections.append(
        Section(
            "ClickHouse: events per topic per hour (wh.stream_progress)",
            tuple(per_topic.column_names),
            [tuple(r) for r in per_topic.result_rows],
        )
    )

    ch_rows = {
        name: {
            (r[catalog.table(name).key_name], r[catalog.table(name).grain]): r
            for r in client.query(f"SELECT * FROM {table_names(catalog.table(name)).merged}").named_results()
        }
        for name in ("user_hourly", "user_daily")
    }
    spark = app.spark
    delta_rows = {}
    for name in ("user_hourly", "user_daily"):
        frame = merged_rows(spark, catalog, settings.delta, name)
        wide = catalog.table(name)
        delta_rows[name] = {(r[wide.key_name], r[wide.grain]): r.asDict() for r in frame.collect()}

    totals: list[tuple[Any, ...]] = []
    for column in ("rows", *activity):
        ch_total = (
            len(ch_rows["user_hourly"])
            if column == "rows"
            else sum(r[column] for r in ch_rows["user_hourly"].values())
        )
        dl_total = (
            len(delta_rows["user_hourly"])
            if column == "rows"
            else sum(r[column] for r in delta_rows["user_hourly"].values())
        )
        totals.append((column, ch_total, dl_total, "=" if ch_total == dl_total else "DIFFERENT"))
    quarantine_dl = spark.read.format("delta").load(delta_side(settings.delta, QUARANTINE)).count()
    late_dl = spark.read.format("delta").load(delta_side(settings.delta, LATE)).count()
    quarantine_ch = client.scalar(f"SELECT count() FROM {QUARANTINE}")
    late_ch = client.scalar(f"SELECT count() FROM {LATE}")
    totals += [("quarantined", quarantine_ch, quarantine_dl, ""), ("late", late_ch, late_dl, "")]
    result.sections.append(
        Section(
            "the same totals from ClickHouse and from Delta (bronze/user_hourly_partials)",
            ("total", "clickhouse", "delta", ""),
            totals,
        )
    )

    expected_counts = manifest.counts()
    for name in ("user_hourly", "user_daily"):
        for sink, rows in (("clickhouse", ch_rows[name]), ("delta", delta_rows[name])):
            problems = diff_rows(manifest.expected_rows(name), rows)
            detail = "" if not problems else f"{len(problems)} differences, e.g. {problems[0]}"
            result.check(f"{sink} {name}", len(manifest.expected_rows(name)), not problems, detail)
    for label, got, want in (
        ("clickhouse quarantine", quarantine_ch, expected_counts.quarantined),
        ("delta quarantine", quarantine_dl, expected_counts.quarantined),
        ("clickhouse late events", late_ch, expected_counts.late),
        ("delta late events", late_dl, expected_counts.late),
    ):
        result.check(label, want, got == want, "" if got == want else f"got {got}")
    if not manifest.exact:
        result.notes.append("publishing fell behind schedule; the manifest's timing margins did not hold")

    progress = spark.read.format("delta").load(delta_side(settings.delta, PROGRESS))
    batches = progress.where(F.col("topic") == GROUP_ROW).collect()
    topic_rows = progress.where(F.col("topic") != GROUP_ROW).collect()
    _throughput(batches, topic_rows, result)
    return result


def _batch(app: Any, catalog: Catalog, manifest: Manifest, result: DemoResult, say: Say) -> None:
    """Finalize the demo's hours into ClickHouse final + Delta silver and check them (demo/batch.py)."""
    from widehouse.batch.finalize import BatchContext
    from widehouse.batch.spark import DeltaSilver, silver_path
    from widehouse.demo.batch import finalize_demo_hours
    from widehouse.pulsar.admin import PulsarAdmin

    settings = app.settings
    spark = app.spark

    def silver_rows(table: str) -> dict[tuple[Any, Any], dict[str, Any]]:
        wide = catalog.table(table)
        frame = (
            spark.read.format("delta")
            .load(silver_path(settings.delta, table))
            .drop("finalized_at", "wh_date")
        )
        return {(r[wide.key_name], r[wide.period]): r.asDict() for r in frame.collect()}

    with PulsarAdmin(settings.pulsar) as admin:
        ctx = BatchContext(
            client=app.clickhouse(),
            admin=admin,
            catalog=catalog,
            silver=DeltaSilver(spark, settings.delta),
            app=settings.stream.app,
            plan_path=settings.state_dir / "plan.json",
        )
        finalize_demo_hours(ctx, manifest, result, silver_rows, say)
        _daily(app, catalog, manifest, result, ctx, say)


def _daily(  # noqa: PLR0917 - the demo's pieces
    app: Any, catalog: Catalog, manifest: Manifest, result: DemoResult, ctx: Any, say: Say
) -> None:
    """Offline Hive data for the demo's users and days, the daily merge through HBase, checks."""
    import datetime as dt

    from widehouse.batch.daily import DailyRequest
    from widehouse.batch.daily.spark import run_daily
    from widehouse.demo.batch import check_demo_days
    from widehouse.offline.spark import OfflineSpec, generate_offline

    settings, spark = app.settings, app.spark
    days = sorted(
        {
            dt.datetime.fromtimestamp(ms / 1000, dt.UTC).date()
            for _, ms in manifest.expected_rows("user_daily")
        }
    )
    options = app_options(manifest)
    spec = OfflineSpec(
        users=options["users"], days=tuple(days), seed=options["seed"], database=OFFLINE_DATABASE
    )
    written = generate_offline(spark, spec, catalog.sql_dir)
    say(f"batch: offline Hive tables for {len(days)} day(s): {written}")

    def hive_users(day: dt.date) -> set[int]:
        query = " UNION ".join(
            f"SELECT uid FROM {OFFLINE_DATABASE}.{t} WHERE dt = '{day.isoformat()}'"
            for t in ("payments", "user_profile", "social_graph")
        )
        return {int(r["uid"]) for r in spark.sql(query).collect()}

    def run_day(day: dt.date) -> Any:
        request = DailyRequest(day=day, offline_database=OFFLINE_DATABASE)
        return run_daily(spark, settings, catalog, ctx.client, ctx.silver, request)

    check_demo_days(ctx, manifest, result, run_day, hive_users, say)


def app_options(manifest: Manifest) -> dict[str, int]:
    """The generator's users and seed, as the manifest recorded them."""
    options = manifest.data.get("options", {})
    return {"users": int(options.get("users", 5000)), "seed": int(options.get("seed", 7))}


def _throughput(batches: list[Any], topic_rows: list[Any], result: DemoResult) -> None:
    run = figures([b.asDict() for b in batches], [r.asDict() for r in topic_rows])
    if not run.messages:
        result.notes.append("no batch carried data")
        return
    result.figures |= {
        "messages": run.messages,
        "batches": run.batches,
        "wall_rate": round(run.wall_rate, 1),
        "batch_rate": round(run.batch_rate, 1),
        "freshness_p50": round(run.freshness_p50, 2),
        "freshness_p95": round(run.freshness_p95, 2),
    }
    result.sections.append(
        Section(
            "measured",
            ("measure", "value"),
            [
                ("messages processed", f"{run.messages:,}"),
                ("micro-batches with data", run.batches),
                ("throughput, wall clock (first batch .. last commit)", f"{run.wall_rate:,.0f} msg/s"),
                ("throughput inside micro-batches", f"{run.batch_rate:,.0f} msg/s"),
                ("freshness p50 (publish -> committed in both sinks)", f"{run.freshness_p50:.1f} s"),
                ("freshness p95", f"{run.freshness_p95:.1f} s"),
            ],
        )
    )


def _next_steps(settings: Settings) -> str:
    return (
        "Query further:\n"
        '  .venv/bin/widehouse sql "SELECT * FROM user_hourly ORDER BY hour DESC LIMIT 10"\n'
        '  .venv/bin/widehouse sql "SELECT reason, count() FROM quarantine GROUP BY reason"\n'
        f"  Delta: spark.read.format('delta').load('{delta_partials(settings.delta, 'user_hourly')}')\n"
        "  (widehouse.stream.spark.readback.merged_rows gives the merged wide rows)\n"
        f"Keep streaming: .venv/bin/widehouse stream --all-groups --plan {settings.state_dir / 'plan.json'}\n"
        "Stop the local services:  make down  (or .venv/bin/widehouse services down)"
    )

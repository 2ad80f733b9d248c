"""Ours vs the idiomatic Spark build of the same wide rows, in one run, from the same source.

Both sides read the same pre-published demo events through the same Pulsar data source in batch
mode (``spark.read.format("pulsar")``, earliest to latest, the topics feeding ``user_hourly``), build
the same per-(key, hour) rows of that table, and bring them to the driver as Arrow, where the sinks
would take them (the sinks would write the same collapsed rows for both, so both leave them out):

- **ours**: what a stream batch does: the stream's own format (:mod:`widehouse.stream.spark.source`:
  the same Pulsar reading tasks, each running the compiled per-topic parse + classify + fold over
  what it reads), ``toArrow`` of the packed partials, then the driver's merge per (key, hour)
  (``merge.settle`` + ``merge.partials``); also **ours, through mapInArrow**: the same transform
  applied to the ``pulsar`` format's rows (the design before, every message crossing the JVM);
- **idiomatic**: per topic ``where(__topic = t)`` + ``from_json(value, topic schema)``, the
  event-time rule as a filter (key and event time present, not absurd, not late), one column per
  mapping (``when(filter, value)``), ``unionByName(allowMissingColumns=True)`` over the topics, and
  ``groupBy(key, hour)`` with the same aggregates (``sum``/``min``/``max``; ``first``/``last`` as
  ``min``/``max`` of ``struct(event time, value)``; counts as sums of ``when(filter, 1)``).

Each side runs ``--runs`` times interleaved (a new plan each time: Spark would otherwise reuse the
last run's shuffle files and skip the read); the table gives wall seconds, events/s and the ratio of
medians. The idiomatic plan scans the source once per topic (a union of filtered scans), so it also
runs with the source persisted first (``idiomatic, source cached``, the caching timed with it).
The idiomatic side does less than ours (no quarantine, late or stats rows, no wrong-type verdicts:
from_json turns a wrong type into a null), so the ratio flatters it, if anything.

    python -m bench idiomatic [--events 300000] [--runs 3]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import machine, save, table
from bench.stream_wide import Bench, _suffix

TABLE = "user_hourly"


def idiomatic_rows(df: Any, catalog: Any, topics: list[str]) -> Any:
    """The wide rows of ``TABLE`` built the way a Spark user would, without Widehouse's transform."""
    from pyspark.sql import functions as F  # noqa: N812 - the name every Spark reader knows

    from widehouse.catalog.filters import backtick_path
    from widehouse.catalog.spark import topic_schema
    from widehouse.contracts.periods import HOUR_MS

    wide = catalog.table(TABLE)
    rules = catalog.rules
    parts = []
    for name in topics:
        topic = catalog.topic(name)
        e = (
            df.where(F.col("__topic") == name)
            .select(
                F.from_json(F.col("value").cast("string"), topic_schema(topic)).alias("e"),
                (F.unix_micros(F.col("__publishTime")) / 1000).cast("long").alias("publish_ms"),
            )
            .select("e.*", "publish_ms")
        )
        key, et = F.col(f"`{topic.key}`"), F.col(f"`{topic.event_time}`")
        behind = F.col("publish_ms") - et
        e = e.where(
            key.isNotNull()
            & et.isNotNull()
            & (et > 0)
            & (-behind <= rules.max_future_ms)
            & (behind <= rules.lateness_ms)
        )
        columns = [key.alias("wh_key"), (et - et % HOUR_MS).alias("wh_hour")]
        for m in topic.mappings_for(TABLE):
            passes = F.expr(m.filter.to_spark_sql(backtick_path)) if m.filter is not None else F.lit(True)
            if m.agg == "count":
                columns.append(F.when(passes, F.lit(1)).otherwise(F.lit(0)).alias(f"{m.column}__{name}"))
                continue
            assert m.field is not None
            value = F.col(backtick_path(m.field))
            if m.agg in ("first", "last"):
                value = F.when(value.isNotNull(), F.struct(et.alias("ts"), value.alias("v")))
            columns.append(F.when(passes, value).alias(f"{m.column}__{name}"))
        parts.append(e.select(*columns))
    union = functools.reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), parts)
    aggs = []
    for column in wide.columns:
        sources = [c for c in union.columns if c.startswith(f"{column.name}__")]
        if not sources:
            continue
        merged = F.coalesce(*[F.col(c) for c in sources]) if len(sources) > 1 else F.col(sources[0])
        fn = {"count": F.sum, "sum": F.sum, "min": F.min, "max": F.max, "first": F.min, "last": F.max}
        aggs.append(fn[column.agg](merged).alias(column.name))
    return union.groupBy("wh_key", "wh_hour").agg(*aggs)


def our_rows(spark: Any, options: dict[str, str], catalog: Any) -> Any:
    """A function running the stream's source (read + transform per task) and merge, as a batch does."""
    from bench.common import stream_plan
    from widehouse.stream import merge
    from widehouse.stream.spark.source import register_wide_source
    from widehouse.stream.transform import unpack

    plans = stream_plan()
    plan = plans.TransformPlan(catalog, (TABLE,))
    name = register_wide_source(spark, "widehouse_wide_bench", plan)

    def run() -> Any:
        packed = spark.read.format(name).options(**options).load().toArrow()
        return merge.partials(merge.settle(unpack(packed, plan), plan), plan, TABLE)

    return run


def our_rows_mapped(df: Any, catalog: Any) -> Any:
    """The same transform as ``mapInArrow`` over the ``pulsar`` format's rows (the design before)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from bench.common import stream_plan
    from widehouse.stream import merge
    from widehouse.stream.transform import transform

    plans = stream_plan()
    plan = plans.TransformPlan(catalog, (TABLE,))
    mapped = df.select("value", "__topic", "__messageId", "__publishTime").mapInArrow(
        functools.partial(transform, plan=plan), from_arrow_schema(plans.output_schema(plan))
    )

    def run() -> Any:
        return merge.partials(merge.settle(mapped.toArrow(), plan), plan, TABLE)

    return run


def measure(bench: Bench, events: int, runs: int) -> dict[str, Any]:
    """Publish ``events`` demo events to fresh topics, then time each side ``runs`` times, interleaved."""
    from widehouse.catalog import load_catalog
    from widehouse.generator.options import GenerateOptions
    from widehouse.generator.run import generate
    from widehouse.source import register, source_options
    from widehouse.spark.session import build_session

    suffix = _suffix()
    settings = bench.settings("idiomatic", suffix=suffix)
    generate(
        settings, GenerateOptions(count=events, rate=0, users=5000, tenant_suffix=suffix, create_topics=True)
    )
    catalog = load_catalog(settings.schemas_dir).relocated(suffix)
    topics = [str(t.name) for t in catalog.topics if TABLE in t.tables]
    spark = build_session(settings, "bench-idiomatic")
    register(spark)
    options = source_options(
        settings.pulsar, tuple(topics), startingOffsets="earliest", endingOffsets="latest"
    )
    df = spark.read.format("pulsar").options(**options).load()
    read = df.count()  # also starts the Python workers: no side pays their start-up

    def read_only() -> int:  # the source alone: what both sides pay before their own work
        df.write.format("noop").mode("overwrite").save()
        return 0

    ours, ours_mapped = our_rows(spark, options, catalog), our_rows_mapped(df, catalog)

    def idiomatic() -> int:
        # a new plan per run: re-running one DataFrame would reuse its shuffle files from the last run
        return int(idiomatic_rows(df, catalog, topics).toArrow().num_rows)

    def idiomatic_cached() -> int:  # what a careful user adds: read the source once, not once per topic
        cached = df.persist()
        try:
            return int(idiomatic_rows(cached, catalog, topics).toArrow().num_rows)
        finally:
            cached.unpersist(blocking=True)

    sides = {
        "read only": read_only,
        "ours": lambda: int(ours().num_rows),
        "ours, through mapInArrow": lambda: int(ours_mapped().num_rows),
        "idiomatic": idiomatic,
        "idiomatic, source cached": idiomatic_cached,
    }
    times: dict[str, list[float]] = {name: [] for name in sides}
    rows: dict[str, int] = {}
    for _ in range(runs):
        for name, run in sides.items():
            started = time.perf_counter()
            rows[name] = run()
            times[name].append(time.perf_counter() - started)
    medians = {name: statistics.median(t) for name, t in times.items()}
    return {
        "events": read,
        "topics": len(topics),
        "runs": times,
        "medians": medians,
        "rows": rows,
        "ratio": medians["idiomatic"] / medians["ours"],
        "ratio_cached": medians["idiomatic, source cached"] / medians["ours"],
    }


def render(result: dict[str, Any]) -> str:
    medians, events = result["medians"], result["events"]
    return (
        table(
            f"\n{TABLE} rows from {events:,} events on {result['topics']} topics, same source, rows to the "
            f"driver, median of {len(result['runs']['ours'])}",
            ("side", "wall s", "events/s", "(key, hour) rows"),
            [(name, medians[name], events / medians[name], result["rows"][name]) for name in medians],
        )
        + f"\nratio (idiomatic time / ours): {result['ratio']:.2f}x"
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench idiomatic", description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=300_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="widehouse-bench-idiomatic-"))
    print(f"machine: {machine()}; state in {root}")
    bench = Bench(root, owns_spark=True)
    try:
        result = measure(bench, args.events, args.runs)
    finally:
        bench.close()
    print(render(result))
    print(f"saved {save('idiomatic', result)}")
    return 0

"""Pulsar source: messages/s into a no-op sink (1, 50, 500 topics), per-batch overhead (1,000 topics).

Real Pulsar (the configured one), local Spark ``local[2]``. For each topic count the same number of
~300-byte JSON messages is published (batched by the producer), then read from the earliest with
``Trigger.AvailableNow`` into Spark's ``noop`` sink; the time is the query's wall time (source
planning included). With ``--streamnative`` the StreamNative JVM connector reads the same topics
in its own environment (see bench/pulsar_streamnative.py) and the ratio is printed.

The overhead part keeps 1,000 topics and measures what one micro-batch costs the source's driver
side (no new data; one new message on every topic), then whole Spark micro-batches that carry one
message from each of the 1,000 topics (progress durations).

    python -m bench pulsar_source [--messages 200000] [--topics 1,50,500] [--overhead-topics 1000]
                                  [--runs 2] [--streamnative] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from bench.common import machine, save, table

DRIVER_ROUNDS = 5
SPARK_ROUNDS = 4
PAYLOAD = (
    '{{"uid": {uid}, "event": "click", "ts": 1700000000000, "page": "/shop/items/{n}", '
    '"referrer": "https://example.com/landing?campaign=autumn", "device": "android", "country": "FR", '
    '"amount": 12.5, "qty": 3, "session": "a1b2c3d4e5f6a1b2c3d4e5f6", "ab": "variant-b", '
    '"flags": [1, 2, 3], "ok": true, "note": "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}}'
)


def publish(client: Any, topics: list[str], total: int) -> None:
    """``total`` messages spread evenly over ``topics`` (batched producers, as apps usually run)."""
    per_topic = max(1, total // len(topics))

    def one(topic: str) -> None:
        producer = client.create_producer(
            topic,
            batching_enabled=True,
            batching_max_messages=100,
            batching_max_publish_delay_ms=5,
            block_if_queue_full=True,
        )
        for i in range(per_topic):
            producer.send_async(PAYLOAD.format(uid=i % 5000, n=i).encode(), None, partition_key=str(i % 5000))
        producer.flush()
        producer.close()

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, topics))


def create_topics(view: Any, names: list[str]) -> None:
    """Non-partitioned topics, created in parallel (one admin session per thread)."""
    view.map(lambda t: view.admin().request("PUT", _rest(t), ok=(200, 204, 409)), names)


def _rest(topic: str) -> str:
    return topic.replace("persistent://", "persistent/", 1)


def run_noop(spark: Any, options: dict[str, str], checkpoint: str) -> dict[str, Any]:
    """One AvailableNow query into the noop sink: wall seconds, rows, batches, progress durations."""
    started = time.perf_counter()
    query = (
        spark.readStream.format("pulsar")
        .options(**options)
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    seconds = time.perf_counter() - started
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    progress = [p for p in query.recentProgress if p.get("numInputRows", 0) > 0]
    return {
        "seconds": seconds,
        "rows": sum(p["numInputRows"] for p in progress),
        "batches": len(progress),
        "durations": [p.get("durationMs", {}) for p in progress],
    }


@dataclass
class Ctx:
    """What every part of the benchmark uses."""

    spark: Any
    settings: Any
    view: Any
    client: Any
    ns: str
    args: argparse.Namespace


def throughput(ctx: Ctx) -> list[dict[str, Any]]:
    spark, settings, view, client, ns, args = ctx.spark, ctx.settings, ctx.view, ctx.client, ctx.ns, ctx.args
    from bench import pulsar_streamnative

    warm = [f"persistent://{ns}/warmup"]
    create_topics(view, warm)
    publish(client, warm, 20_000)
    base = {"serviceUrl": settings.pulsar.service_url, "adminUrl": settings.pulsar.admin_url}
    run_noop(
        spark,
        {**base, "topics": warm[0], "startingOffsets": "earliest", "appId": "warmup"},
        tempfile.mkdtemp(),
    )
    results = []
    for count in args.topics:
        prefix = f"t{count}x"
        topics = [f"persistent://{ns}/{prefix}{i:04d}" for i in range(count)]
        create_topics(view, topics)
        t0 = time.perf_counter()
        publish(client, topics, args.messages)
        produce_s = time.perf_counter() - t0
        expected = (args.messages // count) * count
        runs = []
        for run in range(args.runs):
            options = {
                "topicsPattern": f"{prefix}[0-9]+",
                "namespaces": ns,
                "serviceUrl": settings.pulsar.service_url,
                "adminUrl": settings.pulsar.admin_url,
                "startingOffsets": "earliest",
                "appId": f"bench-{count}-{run}-{uuid.uuid4().hex[:6]}",
            }
            result = run_noop(spark, options, tempfile.mkdtemp(prefix="bench-pulsar-"))
            if result["rows"] != expected:
                raise RuntimeError(f"{count} topics: read {result['rows']} rows, expected {expected}")
            runs.append(result)
        best = min(runs, key=lambda r: r["seconds"])
        trigger_ms = sum(d.get("triggerExecution", 0) for d in best["durations"])
        row: dict[str, Any] = {
            "topics": count,
            "messages": expected,
            "produce_s": produce_s,
            "seconds": [r["seconds"] for r in runs],
            "msgs_per_s": expected / best["seconds"],
            "batch_msgs_per_s": expected / max(trigger_ms, 1) * 1000,
            "batches": best["batches"],
        }
        if args.streamnative:
            row["streamnative"] = pulsar_streamnative.measure(
                settings.pulsar, f"persistent://{ns}/{prefix}.*", expected, runs=args.runs
            )
        results.append(row)
        print(f"  {count} topics: {row['msgs_per_s']:,.0f} msg/s", flush=True)
    return results


def overhead(ctx: Ctx) -> dict[str, Any]:
    """Driver-side cost of a micro-batch over N topics, and whole Spark batches of 1 msg/topic."""
    count = ctx.args.overhead_topics
    topics = [f"persistent://{ctx.ns}/o{i:04d}" for i in range(count)]
    create_topics(ctx.view, topics)
    publish(ctx.client, topics, count)  # one message each, so every topic has a position
    base = {
        "topicsPattern": "o[0-9]+",
        "namespaces": ctx.ns,
        "serviceUrl": ctx.settings.pulsar.service_url,
        "adminUrl": ctx.settings.pulsar.admin_url,
        "startingOffsets": "earliest",
    }
    out: dict[str, Any] = {"topics": count}
    out.update(driver_overhead(ctx, topics, base))
    out.update(spark_overhead(ctx, topics, base))
    # one fresh query reading every topic from the earliest message (first batch: the worst case)
    total = count * (1 + DRIVER_ROUNDS + SPARK_ROUNDS)
    runs = [
        run_noop(ctx.spark, {**base, "appId": f"ovh-all-{uuid.uuid4().hex[:6]}"}, tempfile.mkdtemp())
        for _ in range(ctx.args.runs)
    ]
    assert all(r["rows"] == total for r in runs), [r["rows"] for r in runs]
    out["fresh_query_s"] = min(r["seconds"] for r in runs)
    out["fresh_query_rows"] = total
    if ctx.args.streamnative:
        from bench import pulsar_streamnative

        pattern = f"persistent://{ctx.ns}/o[0-9]+"
        out["streamnative_fresh"] = pulsar_streamnative.measure(
            ctx.settings.pulsar, pattern, total, runs=ctx.args.runs
        )
    return out


def driver_overhead(ctx: Ctx, topics: list[str], base: dict[str, str]) -> dict[str, Any]:
    """The source's own calls, timed directly (what each micro-batch adds on the driver side)."""
    from widehouse.source.controller import StreamController
    from widehouse.source.options import parse_options

    options = parse_options({**base, "appId": f"ovh-{uuid.uuid4().hex[:6]}"}, ctx.settings.pulsar)
    controller = StreamController(options)
    out: dict[str, Any] = {}
    try:
        offset = controller.initial_offset()
        t0 = time.perf_counter()
        offset = controller.latest_offset(offset, None)  # first: discover, examine all, attach subs
        out["first_trigger_ms"] = (time.perf_counter() - t0) * 1000
        controller.commit(offset)
        idle = []
        for _ in range(7):
            t0 = time.perf_counter()
            same = controller.latest_offset(offset, None)
            idle.append((time.perf_counter() - t0) * 1000)
            assert same == offset
        out["idle_latest_offset_ms"] = statistics.median(idle)
        busy, plan = [], []
        for _ in range(DRIVER_ROUNDS):
            publish(ctx.client, topics, len(topics))
            t0 = time.perf_counter()
            end = controller.latest_offset(offset, None)
            busy.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            tasks = controller.plan(offset, end)
            plan.append((time.perf_counter() - t0) * 1000)
            assert sum(t.messages for t in tasks) == len(topics)
            controller.commit(end)
            offset = end
        out["busy_latest_offset_ms"] = statistics.median(busy)
        out["plan_ms"] = statistics.median(plan)
        out["offset_json_bytes"] = len(json.dumps(offset))
    finally:
        controller.stop()
    return out


def spark_overhead(ctx: Ctx, topics: list[str], base: dict[str, str]) -> dict[str, Any]:
    """Steady-state Spark micro-batches of a running query, each with one new message per topic.

    The query holds each trigger until all of a round's messages are there
    (``minMessagesPerTrigger``), so every measured batch carries exactly one message per topic.
    """
    count = len(topics)
    options = {
        **base,
        "appId": f"ovh-spark-{uuid.uuid4().hex[:6]}",
        "startingOffsets": "latest",
        "minMessagesPerTrigger": str(count),
        "maxTriggerDelay": "120s",
    }
    query = (
        ctx.spark.readStream.format("pulsar")
        .options(**options)
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", tempfile.mkdtemp(prefix="bench-pulsar-ovh-"))
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    try:
        deadline = time.monotonic() + 120
        while not query.recentProgress:  # the first (empty) batch pins the starting positions
            if time.monotonic() > deadline or query.exception() is not None:
                raise RuntimeError(f"the query did not start: {query.exception()}")
            time.sleep(0.5)
        for round_ in range(SPARK_ROUNDS):
            publish(ctx.client, topics, count)
            deadline = time.monotonic() + 180
            while sum(p["numInputRows"] for p in query.recentProgress) < count * (round_ + 1):
                if time.monotonic() > deadline or query.exception() is not None:
                    raise RuntimeError(f"round {round_} not read: {query.exception()}")
                time.sleep(0.2)
        batches = [p for p in query.recentProgress if p["numInputRows"] == count][1:]  # first: warm-up
    finally:
        query.stop()
    durations = [b["durationMs"] for b in batches]
    out: dict[str, Any] = {"spark_batches": len(batches)}
    keys = ("triggerExecution", "latestOffset", "queryPlanning", "addBatch", "walCommit", "commitOffsets")
    for key in keys:
        out[f"spark_{key}_ms"] = statistics.median(d.get(key, 0) for d in durations)
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench pulsar_source", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--messages", type=int, default=200_000, help="messages per topic-count run")
    parser.add_argument("--topics", default="1,50,500", help="topic counts for the throughput table")
    parser.add_argument("--overhead-topics", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=2, help="runs per configuration (best is reported)")
    parser.add_argument("--streamnative", action="store_true", help="also run the StreamNative connector")
    parser.add_argument("--skip-overhead", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the benchmark namespace")
    args = parser.parse_args(argv)
    args.topics = [int(x) for x in args.topics.split(",") if x.strip()]

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from widehouse.pulsar import client as pulsar_client
    from widehouse.settings import load_settings
    from widehouse.source import register
    from widehouse.source.broker import BrokerView
    from widehouse.testing.spark import small_session

    state = tempfile.mkdtemp(prefix="bench-pulsar-state-")
    settings = load_settings({**os.environ, "WIDEHOUSE_STATE_DIR": state})
    ns = f"widehouse-bench/ps-{uuid.uuid4().hex[:8]}"
    spark = small_session("bench-pulsar-source", settings)
    register(spark)
    client = pulsar_client.connect(settings.pulsar)
    view = BrokerView(settings.pulsar, concurrency=8)
    view.admin().ensure_namespace(ns)
    print(f"namespace {ns}; {machine()}", flush=True)
    try:
        ctx = Ctx(spark, settings, view, client, ns, args)
        rows = throughput(ctx)
        over = None if args.skip_overhead else overhead(ctx)
    finally:
        client.close()
        if not args.keep:
            _drop(view, ns)
        view.close()
        spark.stop()
    report(rows, over, args.streamnative)
    path = save("pulsar_source", {"throughput": rows, "overhead": over, "args": vars(args)})
    print(f"\nfigures saved to {path}")
    return 0


def report(rows: list[dict[str, Any]], over: dict[str, Any] | None, streamnative: bool) -> None:
    print()
    header = ["topics", "messages", "query s", "msg/s", "batch msg/s"]
    if streamnative:
        header += ["SN query s", "SN msg/s", "SN batch msg/s", "ratio msg/s", "ratio batch"]
    body = []
    for r in rows:
        line: list[object] = [
            r["topics"],
            r["messages"],
            min(r["seconds"]),
            r["msgs_per_s"],
            r["batch_msgs_per_s"],
        ]
        if streamnative:
            sn = r["streamnative"]
            if sn.get("msgs_per_s"):
                line += [
                    min(sn["seconds"]),
                    sn["msgs_per_s"],
                    sn["batch_msgs_per_s"],
                    f"{r['msgs_per_s'] / sn['msgs_per_s']:.2f}x",
                    f"{r['batch_msgs_per_s'] / sn['batch_msgs_per_s']:.2f}x",
                ]
            else:
                line += ["n/a", "n/a", "n/a", "-", sn.get("error", "")[-80:].replace("\n", " ")]
        body.append(line)
    title = (
        "Pulsar source -> noop sink, local[2], batched producers; msg/s over the query's wall time "
        "(start to end), batch msg/s over the micro-batch(es) alone; SN = StreamNative 3.1.1.4 on Spark 3.1.3"
    )
    print(table(title, header, body))
    if over:
        print()
        print(
            table(
                f"Per-batch overhead with {over['topics']} topics",
                ["measure", "ms"],
                [
                    ["first trigger (discover, examine, attach subscriptions)", over["first_trigger_ms"]],
                    ["latestOffset, nothing new (median)", over["idle_latest_offset_ms"]],
                    ["latestOffset, 1 new msg on every topic (median)", over["busy_latest_offset_ms"]],
                    ["partitions() planning of that batch", over["plan_ms"]],
                    [
                        "Spark micro-batch, 1 msg from every topic: triggerExecution",
                        over["spark_triggerExecution_ms"],
                    ],
                    ["  of which latestOffset (the last poll)", over["spark_latestOffset_ms"]],
                    ["  of which queryPlanning", over["spark_queryPlanning_ms"]],
                    ["  of which addBatch (read + noop)", over["spark_addBatch_ms"]],
                    [
                        "  of which walCommit + commitOffsets",
                        over["spark_walCommit_ms"] + over["spark_commitOffsets_ms"],
                    ],
                ],
            )
        )
        print(f"offset JSON per batch: {over['offset_json_bytes']:,} bytes")
        fresh = f"{over['fresh_query_s']:.2f} s"
        sn = over.get("streamnative_fresh")
        if sn is not None:
            sn_text = (
                f"{min(sn['seconds']):.2f} s" if "seconds" in sn else f"n/a ({sn.get('error', '')[-80:]})"
            )
            fresh += f"; StreamNative: {sn_text}"
        print(
            f"a new query reading all {over['fresh_query_rows']:,} messages of the "
            f"{over['topics']} topics: {fresh}"
        )


def _drop(view: Any, namespace: str) -> None:
    from widehouse.errors import PulsarError

    try:
        names = view.admin().list_topics(namespace)
        view.map(
            lambda t: view.admin().request("DELETE", _rest(t), params={"force": "true"}, ok=(200, 204, 404)),
            names,
        )
        view.admin().request("DELETE", f"namespaces/{namespace}", ok=(200, 204, 404, 409))
    except PulsarError as exc:
        print(f"(cleanup of {namespace} incomplete: {exc})", file=sys.stderr)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""Pulsar sink: msg/s written by the ``pulsar`` sink, against the source's read rate and a plain publisher.

Real Pulsar (the configured one, deduplication enabled on the benchmark namespace), Spark
``local[2]``, ~300-byte JSON messages with keys. Rows, best of ``--runs``:

- publisher: the generator's way of publishing (raw C++ producers, one per partition, batches of
  1000 / 100 ms, LZ4, async, no per-message callback), from one Python process: the ceiling;
- source read: ``readStream.format("pulsar")`` from the earliest into the ``noop`` sink;
- sink, batch: ``df.write.format("pulsar")`` of an in-memory frame (cached, counted first);
- sink, batch from the source: ``spark.read.format("pulsar")`` -> ``write.format("pulsar")``;
- sink, stream exactly-once: ``readStream`` -> ``writeStream.format("pulsar")``, AvailableNow.

    python -m bench pulsar_sink [--messages 200000] [--partitions 2] [--runs 2] [--keep]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
import zlib
from typing import Any

from bench.common import machine, save, table
from bench.pulsar_source import PAYLOAD


def _payloads(n: int) -> tuple[list[bytes], list[str]]:
    return [PAYLOAD.format(uid=i % 5000, n=i).encode() for i in range(n)], [str(i % 5000) for i in range(n)]


def publish(settings: Any, topic: str, partitions: int, n: int) -> float:
    """The generator publisher's settings; returns seconds for ``n`` messages (payloads prebuilt)."""
    import _pulsar
    import pulsar

    from widehouse.pulsar import client as pulsar_client

    payloads, keys = _payloads(n)
    client = pulsar_client.connect(settings.pulsar)  # the C++ console logger, connect()'s default
    names = [f"{topic}-partition-{i}" for i in range(partitions)]
    producers = [
        client.create_producer(
            name,
            batching_enabled=True,
            batching_max_messages=1000,
            batching_max_allowed_size_in_bytes=1024 * 1024,
            batching_max_publish_delay_ms=100,
            max_pending_messages=5000,
            block_if_queue_full=True,
            send_timeout_millis=0,
            compression_type=pulsar.CompressionType.LZ4,
        )
        for name in names
    ]
    raw = [p._producer for p in producers]
    builder = _pulsar.MessageBuilder
    started = time.perf_counter()
    for payload, key in zip(payloads, keys, strict=True):
        raw[zlib.crc32(key.encode()) % partitions].send_async(
            builder().content(payload).partition_key(key).build(), None
        )
    for producer in producers:
        producer.flush()
    seconds = time.perf_counter() - started
    for producer in producers:
        producer.close()
    client.close()
    return seconds


def _stream(spark: Any, reader: Any, sink: str, options: dict[str, str], checkpoint: str) -> float:
    started = time.perf_counter()
    writer = reader.writeStream.format(sink).options(**options).option("checkpointLocation", checkpoint)
    query = writer.trigger(availableNow=True).start()
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    return time.perf_counter() - started


def _measure(
    spark: Any, settings: Any, admin: Any, ns: str, *, state: str, args: argparse.Namespace
) -> dict[str, list[float]]:
    """Seconds per run of every row (see the module docstring)."""
    from widehouse.source import source_options

    n, parts = args.messages, args.partitions
    results: dict[str, list[float]] = {}
    source = f"persistent://{ns}/source"
    admin.ensure_partitions(source, parts)
    results["publisher (generator settings, 1 process)"] = [publish(settings, source, parts, n)]
    for run in range(1, args.runs):
        target = f"persistent://{ns}/pub-{run}"
        admin.ensure_partitions(target, parts)
        results["publisher (generator settings, 1 process)"].append(publish(settings, target, parts, n))
    read_opts = source_options(settings.pulsar, [source], appId="bench", startingOffsets="earliest")
    payloads, keys = _payloads(n)
    frame = spark.createDataFrame(list(zip(payloads, keys, strict=True)), "value binary, __key string")
    frame = frame.repartition(2).cache()
    frame.count()
    for run in range(args.runs):
        checkpoint = f"{state}/ck-read-{run}"
        stream = spark.readStream.format("pulsar").options(**read_opts).load()
        seconds = _stream(spark, stream.selectExpr("value"), "noop", {}, checkpoint)
        results.setdefault("source read (noop sink)", []).append(seconds)
        for label, make in (
            ("sink, batch (in-memory frame)", lambda: frame),
            (
                "sink, batch from the source",
                lambda: spark.read.format("pulsar").options(**read_opts).load().select("value", "__key"),
            ),
        ):
            target = f"persistent://{ns}/t-{uuid.uuid4().hex[:6]}"
            admin.ensure_partitions(target, parts)
            df = make()
            started = time.perf_counter()
            df.write.format("pulsar").mode("append").option("topic", target).save()
            results.setdefault(label, []).append(time.perf_counter() - started)
        target = f"persistent://{ns}/s-{uuid.uuid4().hex[:6]}"
        admin.ensure_partitions(target, parts)
        stream = spark.readStream.format("pulsar").options(**read_opts).load().select("value", "__key")
        options = {"topic": target, "requireExactlyOnce": "true"}
        seconds = _stream(spark, stream, "pulsar", options, f"{state}/ck-sink-{run}")
        results.setdefault("sink, stream exactly-once (source -> sink)", []).append(seconds)
    return results


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench pulsar_sink", description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--runs", type=int, default=2, help="runs per row (best is reported)")
    parser.add_argument("--keep", action="store_true", help="keep the benchmark namespace")
    args = parser.parse_args(argv)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from tests.integration.pulsar_support import drop_namespace
    from widehouse.pulsar.admin import PulsarAdmin
    from widehouse.pulsar.dedup import enable_deduplication
    from widehouse.settings import load_settings
    from widehouse.source import register
    from widehouse.testing.spark import small_session

    state = tempfile.mkdtemp(prefix="bench-pulsar-sink-")
    settings = load_settings({**os.environ, "WIDEHOUSE_STATE_DIR": state})
    ns = f"widehouse-bench/sink-{uuid.uuid4().hex[:8]}"
    admin = PulsarAdmin(settings.pulsar)
    admin.ensure_namespace(ns)
    enable_deduplication(admin, ns)
    spark = small_session("bench-pulsar-sink", settings)
    register(spark)
    n, parts = args.messages, args.partitions
    print(f"namespace {ns}; {n:,} messages, {parts} partitions; {machine()}", flush=True)
    try:
        results = _measure(spark, settings, admin, ns, state=state, args=args)
    finally:
        spark.stop()
        if not args.keep:
            drop_namespace(admin, ns)
        admin.close()
    ceiling = n / min(results["publisher (generator settings, 1 process)"])
    rows = []
    for label, times in results.items():
        best = min(times)
        rows.append((label, round(best, 2), round(n / best), f"{n / best / ceiling:.2f}x"))
    print()
    print(
        table(
            f"pulsar sink, {n:,} messages (best of {args.runs})", ("path", "s", "msg/s", "vs publisher"), rows
        )
    )
    path = save("pulsar_sink", {"results": results, "args": vars(args)})
    print(f"\nfigures saved to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

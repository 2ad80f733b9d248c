"""The ``pulsar`` Spark source end to end against the real broker (local Spark).

Exactly the published messages arrive across stop and restart; admission control holds per
trigger and its metrics are exact; topics and partitions created mid-stream are read; 200 topics
in one query; per-topic starting offsets; batch reads between message ids; bad options fail with
the option named. (The crash test is in test_pulsar_source_crash.py.)
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

# Spark starts the Python data source planner and stream reader with PYSPARK_PYTHON (not the
# spark.pyspark.python setting): point it at this interpreter before the session's JVM starts.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from tests.integration.pulsar_support import publish
from widehouse.pulsar.admin import PulsarAdmin
from widehouse.settings import Settings

pytestmark = [pytest.mark.integration, pytest.mark.spark]


@pytest.fixture(scope="module")
def source(spark: Any, services: Settings) -> Any:
    from widehouse.source import register

    register(spark)
    return spark


def options(services: Settings, **extra: Any) -> dict[str, str]:
    from widehouse.source import source_options

    return source_options(services.pulsar, extra.pop("topics", []), **extra)


def run_available_now(spark: Any, opts: dict[str, str], checkpoint: Path, out: Path) -> list[dict[str, Any]]:
    """One Trigger.AvailableNow run into an idempotent sink (parquet per batch id); per-batch info."""
    from widehouse.source import batch_metrics

    seen: list[dict[str, Any]] = []

    def sink(df: Any, batch_id: int) -> None:
        df.write.mode("overwrite").parquet(str(out / f"batch={batch_id}"))
        metrics = batch_metrics(spark, str(checkpoint), batch_id)
        seen.append({"batch": batch_id, "rows": df.count(), "metrics": metrics})

    query = (
        spark.readStream.format("pulsar")
        .options(**opts)
        .load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(300)
    assert query.exception() is None, query.exception()
    return seen


def read_sink(spark: Any, out: Path) -> list[Any]:
    return spark.read.parquet(str(out)).select("value", "__topic", "__messageId").collect()


def test_exactly_once_across_stop_and_restart_with_admission_control(
    source: Any, services: Settings, ns: str, client: Any, tmp_path: Path
) -> None:
    spark = source
    big, small = f"persistent://{ns}/big", f"persistent://{ns}/small"
    with PulsarAdmin(services.pulsar) as admin:
        admin.ensure_partitions(big, 3)
    sent = publish(client, big, 600, batch=20) + publish(client, small, 30)
    opts = options(
        services,
        topics=[big, small],
        appId="eo",
        startingOffsets="earliest",
        maxMessagesPerTrigger=250,
        minMessagesPerTopic=20,
    )
    checkpoint, out = tmp_path / "checkpoint", tmp_path / "out"
    first = run_available_now(spark, opts, checkpoint, out)
    assert [b["rows"] for b in first] == [250, 250, 130]  # the budget, per trigger
    assert {m.topic for m in first[0]["metrics"] if m.rows} == {big, small}  # the floor
    for batch in first:
        assert sum(m.rows for m in batch["metrics"]) == batch["rows"]
    assert first[0]["metrics"][0].lag + first[0]["metrics"][1].lag == 630 - 250
    # stop, more data, restart from the checkpoint
    sent += publish(client, big, 90, batch=7, tag="later") + publish(client, small, 10, tag="later")
    second = run_available_now(spark, opts, checkpoint, out)
    assert sum(b["rows"] for b in second) == 100
    assert second[0]["batch"] == first[-1]["batch"] + 1
    rows = read_sink(spark, out)
    payloads = [r.value.decode() for r in rows]
    assert len(payloads) == len(set(payloads)) == len(sent)
    assert set(payloads) == set(sent)
    assert len({(r["__topic"], r["__messageId"]) for r in rows}) == len(rows)  # ids are unique per topic
    assert {r["__topic"] for r in rows} == {big, small}


def test_rows_carry_the_message_metadata(source: Any, services: Settings, ns: str, client: Any) -> None:
    spark = source
    topic = f"persistent://{ns}/meta"
    publish(client, topic, 3)
    df = spark.read.format("pulsar").option("topics", topic).load()
    rows = sorted(df.collect(), key=lambda r: r.value)
    assert [r.value.decode() for r in rows] == [f"{topic}#{i}" for i in range(3)]
    assert [r["__key"] for r in rows] == ["k0", "k1", "k2"]
    assert [r["__properties"] for r in rows] == [{"n": "0"}, {"n": "1"}, {"n": "2"}]
    assert rows[0]["__eventTime"].timestamp() == pytest.approx(1.0)
    assert abs(rows[0]["__publishTime"].timestamp() - time.time()) < 600
    ledger, entry, partition, batch = (int(x) for x in rows[0]["__messageId"].split(":"))
    assert ledger >= 0 and entry >= 0 and (partition, batch) == (-1, -1)


def test_topics_and_partitions_created_mid_stream_are_read(
    source: Any, services: Settings, ns: str, client: Any, tmp_path: Path
) -> None:
    spark = source
    grown = f"persistent://{ns}/grown"
    with PulsarAdmin(services.pulsar) as admin:
        admin.ensure_partitions(grown, 1)
        sent = publish(client, grown, 20)
        got: list[str] = []
        lock = threading.Lock()

        def sink(df: Any, _batch_id: int) -> None:
            values = [r.value.decode() for r in df.select("value").collect()]
            with lock:
                got.extend(values)

        opts = options(
            services, topicsPattern="g.*|n.*", namespaces=ns, appId="mid", startingOffsets="earliest"
        )
        query = (
            spark.readStream.format("pulsar")
            .options(**opts)
            .load()
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(processingTime="1 second")
            .start()
        )
        try:
            _wait(lambda: len(got) >= 20, query)
            admin.ensure_partitions(grown, 3)  # two new partitions
            sent += publish(client, grown, 60, tag="after-grow")
            sent += publish(client, f"persistent://{ns}/new-topic", 15)  # a new topic
            _wait(lambda: len(got) >= len(sent), query)
            time.sleep(2)  # a few more triggers: nothing more may arrive
        finally:
            query.stop()
    assert sorted(got) == sorted(sent)


def _wait(condition: Any, query: Any, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if query.exception() is not None:
            raise AssertionError(query.exception())
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out; last progress: {query.lastProgress}")
        time.sleep(0.5)


def test_two_hundred_topics_in_one_query(
    source: Any, services: Settings, ns: str, client: Any, tmp_path: Path
) -> None:
    spark = source
    topics = [f"persistent://{ns}/t{i:03d}" for i in range(200)]
    sent: list[str] = []
    for topic in topics:
        sent += publish(client, topic, 3)
    opts = options(services, topicsPattern="t[0-9]+", namespaces=ns, appId="wide", startingOffsets="earliest")
    batches = run_available_now(spark, opts, tmp_path / "checkpoint", tmp_path / "out")
    assert sum(b["rows"] for b in batches) == 600
    assert len({m.topic for b in batches for m in b["metrics"]}) == 200
    payloads = [r.value.decode() for r in read_sink(spark, tmp_path / "out")]
    assert sorted(payloads) == sorted(sent)


def test_per_topic_starting_offsets(
    source: Any, services: Settings, ns: str, client: Any, tmp_path: Path
) -> None:
    spark = source
    a, b, c = (f"persistent://{ns}/{x}" for x in ("a", "b", "c"))
    with PulsarAdmin(services.pulsar) as admin:
        admin.ensure_partitions(c, 2)
    before = {t: publish(client, t, 10) for t in (a, b, c)}
    c_rows = spark.read.format("pulsar").option("topics", c).load().collect()
    p0 = sorted(
        (r for r in c_rows if r["__messageId"].split(":")[2] == "0"), key=lambda r: r["__publishTime"]
    )
    assert len(p0) >= 3
    start_at = p0[2]  # partition 0 starts at its third message
    starting = {a: "earliest", b: "latest", c: {"0": start_at["__messageId"], "1": "latest"}}
    opts = options(services, topics=[a, b, c], appId="starts", startingOffsets=starting)
    first = run_available_now(spark, opts, tmp_path / "checkpoint", tmp_path / "out")
    got = {r.value.decode() for r in read_sink(spark, tmp_path / "out")}
    expected = set(before[a]) | {r.value.decode() for r in p0[2:]}
    assert got == expected, sorted(got ^ expected)
    # later messages arrive on every partition, whatever its starting point
    after = {t: publish(client, t, 4, tag="after") for t in (a, b, c)}
    second = run_available_now(spark, opts, tmp_path / "checkpoint", tmp_path / "out")
    got = {r.value.decode() for r in read_sink(spark, tmp_path / "out")}
    assert got == expected | {p for t in after for p in after[t]}
    assert sum(b["rows"] for b in first) == len(expected) and sum(b["rows"] for b in second) == 12


def test_batch_read_between_message_ids(source: Any, services: Settings, ns: str, client: Any) -> None:
    spark = source
    topic = f"persistent://{ns}/replay"
    sent = publish(client, topic, 50, batch=8)
    rows = spark.read.format("pulsar").option("topics", topic).load().collect()
    by_payload = {r.value.decode(): r["__messageId"] for r in rows}
    assert sorted(by_payload) == sorted(sent)
    start_id, end_id = by_payload[sent[11]], by_payload[sent[37]]
    between = (
        spark.read.format("pulsar")
        .option("topics", topic)
        .option("startingOffsets", json.dumps({topic: start_id}))
        .option("endingOffsets", json.dumps({topic: end_id}))
        .load()
    )
    got = sorted((r.value.decode() for r in between.collect()), key=lambda p: int(p.rsplit("#", 1)[1]))
    assert got == sent[11:37]  # start inclusive, end exclusive
    latest = spark.read.format("pulsar").option("topics", topic).option("startingOffsets", "latest").load()
    assert latest.count() == 0


def test_bad_options_fail_with_the_option_named(source: Any, services: Settings, tmp_path: Path) -> None:
    spark = source
    with pytest.raises(Exception, match="option topics: 'not-a-topic' is not a full Pulsar topic name"):
        spark.read.format("pulsar").option("topics", "not-a-topic").load()
    with pytest.raises(Exception, match="maxMessagesPerTrigger='0' must be >= 1"):
        spark.readStream.format("pulsar").option("topics", "persistent://t/ns/a").option(
            "maxMessagesPerTrigger", "0"
        ).load()
    with pytest.raises(Exception, match=r"unknown option 'startingoffset'.* did you mean startingOffsets"):
        spark.read.format("pulsar").option("topics", "persistent://t/ns/a").option(
            "startingOffset", "earliest"
        ).load()
    stream = spark.readStream.format("pulsar").option("topics", "persistent://t/ns/a").load()
    query = (
        stream.writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "c"))
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(Exception, match="option appId is required"):
        query.awaitTermination(120)

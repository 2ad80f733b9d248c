"""Smoke checks: one real round trip through each part, for the demo and for `widehouse smoke`.

Each check creates what it needs under a unique name, verifies the data that comes back, and
cleans up. The Spark check (Delta + Hive) lives in :mod:`widehouse.smoke.spark`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from widehouse import clickhouse, hbase
from widehouse.errors import WidehouseError
from widehouse.pulsar import PulsarAdmin, TopicName
from widehouse.pulsar import client as pulsar_client
from widehouse.settings import Settings


@dataclass(frozen=True)
class CheckResult:
    name: str
    ok: bool
    detail: str
    seconds: float


class SmokeCheckError(WidehouseError):
    """A smoke check read back something other than what it wrote."""


def _run(name: str, check: Callable[[], str]) -> CheckResult:
    t0 = time.monotonic()
    try:
        detail = check()
    except Exception as exc:  # report every failing part, not just the first
        return CheckResult(name, False, f"{type(exc).__name__}: {exc}", time.monotonic() - t0)
    return CheckResult(name, True, detail, time.monotonic() - t0)


def check_pulsar(settings: Settings, messages: int = 200) -> str:
    """Produce to a 2-partition topic, consume everything back, read its stats over REST."""
    topic = TopicName.parse(f"persistent://public/default/widehouse-smoke-{uuid.uuid4().hex[:8]}")
    with PulsarAdmin(settings.pulsar) as admin:
        admin.ensure_partitions(topic, 2)
        client = pulsar_client.connect(settings.pulsar)
        try:
            import pulsar

            consumer = client.subscribe(
                str(topic),
                "widehouse-smoke",
                initial_position=pulsar.InitialPosition.Earliest,
            )
            producer = client.create_producer(str(topic), batching_enabled=True)
            sent = {f"m{i}".encode() for i in range(messages)}
            for i, payload in enumerate(sorted(sent)):
                producer.send_async(payload, None, partition_key=f"k{i % 7}")
            producer.flush()
            received: set[bytes] = set()
            while len(received) < messages:
                msg = consumer.receive(timeout_millis=10_000)
                received.add(msg.data())
                consumer.acknowledge(msg)
            if received != sent:
                raise SmokeCheckError(f"pulsar: sent {len(sent)} distinct messages, got {len(received)}")
            stats = admin.stats(topic)
            partitions = len(stats.get("partitions", {}))
            in_counter = int(stats.get("msgInCounter", 0))
            if in_counter != messages:
                raise SmokeCheckError(f"pulsar: stats msgInCounter={in_counter}, expected {messages}")
        finally:
            client.close()
            admin.delete_topic(topic)
    return f"{messages} messages through {partitions} partitions, stats agree"


def check_hbase(settings: Settings) -> str:
    """Create a table with two families, put rows, scan them back, drop the table."""
    table_name = f"widehouse_smoke_{uuid.uuid4().hex[:8]}"
    connection = hbase.connect(settings.hbase)
    try:
        connection.create_table(table_name, {"s": {}, "h": {}})
        table = connection.table(table_name)
        rows = {f"{i:02d}|20260101|u{i}".encode(): {b"s:n": str(i).encode(), b"h:x": b"y"} for i in range(10)}
        with table.batch() as batch:
            for key, data in rows.items():
                batch.put(key, data)
        scanned = dict(table.scan())
        if scanned != rows:
            raise SmokeCheckError(f"hbase: put {len(rows)} rows, scanned {len(scanned)} different ones")
    finally:
        if table_name.encode() in connection.tables():
            connection.delete_table(table_name, disable=True)
        connection.close()
    return "10 rows put and scanned back in two column families"


def check_clickhouse(settings: Settings) -> str:
    """Create a table, insert an Arrow table, aggregate it back."""
    import pyarrow as pa

    client = clickhouse.connect(settings.clickhouse)
    table = f"smoke_{uuid.uuid4().hex[:8]}"
    try:
        client.command(f"CREATE TABLE {table} (uid String, n UInt64) ENGINE = MergeTree ORDER BY uid")
        data = pa.table({"uid": [f"u{i % 10}" for i in range(1000)], "n": pa.array(range(1000), pa.uint64())})
        client.insert_arrow(table, data)
        rows = client.query(f"SELECT count(), sum(n), uniqExact(uid) FROM {table}").result_rows
        if rows != [(1000, 499500, 10)]:
            raise SmokeCheckError(f"clickhouse: expected (1000, 499500, 10), got {rows}")
    finally:
        client.command(f"DROP TABLE IF EXISTS {table}")
        client.close()
    kind = "embedded chDB" if settings.clickhouse.embedded else "server"
    return f"1000 rows inserted as Arrow and aggregated ({kind}, {settings.clickhouse.display_dsn})"


def run_checks(settings: Settings, spark: bool = True) -> list[CheckResult]:
    results = [
        _run("pulsar", lambda: check_pulsar(settings)),
        _run("hbase", lambda: check_hbase(settings)),
        _run("clickhouse", lambda: check_clickhouse(settings)),
    ]
    if spark:
        from widehouse.smoke.spark import check_spark  # heavy import only when asked

        results.append(_run("spark-delta-hive", lambda: check_spark(settings)))
    return results

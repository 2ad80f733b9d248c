"""The ``pulsar`` sink against the real broker: routing, content, and what it says without dedup."""

from __future__ import annotations

import datetime as dt
import os
import sys
import time
from typing import Any

import pytest

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from tests.integration.pulsar_support import read_all
from widehouse.pulsar import PulsarAdmin
from widehouse.pulsar.dedup import deduplication, enable_deduplication
from widehouse.settings import Settings

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_batch_write_routes_rows_by_topic_column(spark: Any, services: Settings, ns: str) -> None:
    from widehouse.source import register

    register(spark)
    orders, clicks = f"persistent://{ns}/orders", f"persistent://{ns}/clicks"
    with PulsarAdmin(services.pulsar) as admin:
        enable_deduplication(admin, ns)
        admin.ensure_partitions(orders, 2)
    event = dt.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=dt.UTC)
    rows = [
        ("o1", orders, "u1", event, {"a": "1"}),
        ("o2", orders, "u2", None, None),
        ("o3", orders, None, None, {}),
        ("c1", clicks, "u1", event, {"b": "2", "c": "3"}),
        ("c2", clicks, None, None, None),
    ]
    schema = (
        "value string, __topic string, __key string, __eventTime timestamp, __properties map<string,string>"
    )
    spark.createDataFrame(rows, schema).repartition(2).write.format("pulsar").mode("append").options(
        serviceUrl=services.pulsar.service_url, adminUrl=services.pulsar.admin_url
    ).save()

    def got(topic: str) -> list[tuple[Any, ...]]:
        return sorted(
            (m.data().decode(), m.partition_key(), m.event_timestamp(), m.properties())
            for m in read_all(services.pulsar, topic)
        )

    assert got(orders) == [
        ("o1", "u1", 1767323045678, {"a": "1"}),
        ("o2", "u2", 0, {}),
        ("o3", "", 0, {}),
    ]
    assert got(clicks) == [("c1", "u1", 1767323045678, {"b": "2", "c": "3"}), ("c2", "", 0, {})]


def test_topic_option_and_binary_values(spark: Any, services: Settings, ns: str) -> None:
    from widehouse.source import register

    register(spark)
    target = f"persistent://{ns}/plain"
    df = spark.createDataFrame([(b"\x00\x01",), (b"x",)], "value binary")
    df.write.format("pulsar").mode("append").option("topic", target).save()
    assert sorted(m.data() for m in read_all(services.pulsar, target)) == [b"\x00\x01", b"x"]


def test_without_topic_the_sink_says_so(spark: Any, services: Settings) -> None:
    from widehouse.source import register

    register(spark)
    df = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(Exception, match="needs option topic, or a __topic column"):
        df.write.format("pulsar").mode("append").save()
    bad = spark.createDataFrame([("v", "x")], "value string, __topics string")
    with pytest.raises(Exception, match="does not know column '__topics'"):
        bad.write.format("pulsar").mode("append").option("topic", "persistent://a/b/c").save()


def test_dedup_off_means_at_least_once(spark: Any, services: Settings, ns: str) -> None:
    from widehouse.source import register

    register(spark)
    target = f"persistent://{ns}/weak"
    with PulsarAdmin(services.pulsar) as admin:
        enable_deduplication(admin, ns, enabled=False)
        status = deduplication(admin, target)
    assert (status.enabled, status.guarantee) == (False, "at-least-once")
    assert f"widehouse pulsar dedup --enable {ns}" in status.advice()

    df = spark.createDataFrame([("v1", target), ("v2", target)], "value string, __topic string")
    # refused up front when the topic is known from the options ...
    with pytest.raises(Exception, match=r"requireExactlyOnce=true refuses to write: deduplication is off"):
        df.select("value").write.format("pulsar").mode("append").options(
            topic=target, requireExactlyOnce="true"
        ).save()
    # ... and in the task, before sending, when rows name it
    with pytest.raises(Exception, match=rf"deduplication is off for {target}"):
        df.write.format("pulsar").mode("append").option("requireExactlyOnce", "true").save()
    assert read_all(services.pulsar, target) == []
    # without requireExactlyOnce it writes (at-least-once, with a warning in the executor log)
    df.write.format("pulsar").mode("append").save()
    assert sorted(m.data() for m in read_all(services.pulsar, target)) == [b"v1", b"v2"]


def test_a_replayed_task_sends_only_what_is_missing(services: Settings, ns: str) -> None:
    """A task that fails after part of its rows: the retry (same names, same ids) adds the rest."""
    import pyarrow as pa

    from widehouse.source.sink import WriteIdentity, write_batches
    from widehouse.source.sink_options import SinkOptions

    target = f"persistent://{ns}/replayed"
    with PulsarAdmin(services.pulsar) as admin:
        enable_deduplication(admin, ns)
        admin.ensure_partitions(target, 2)
    options = SinkOptions(
        pulsar=services.pulsar, topic=target, require_exactly_once=True, batch_max_messages=7
    )
    identity = WriteIdentity("q1", 5, 3)
    rows = [f"r{i}" for i in range(100)]
    keys = [f"k{i % 9}" if i % 4 else None for i in range(100)]
    batches = pa.table({"value": rows, "__key": keys}).to_batches(max_chunksize=16)

    def cut_off() -> Any:
        yield from batches[:3]  # 48 rows, then the task dies
        raise RuntimeError("executor lost")

    with pytest.raises(RuntimeError, match="executor lost"):
        write_batches(cut_off(), options, identity)
    time.sleep(1.0)  # batches already on the wire when the producers closed may still be stored
    stored = len(read_all(services.pulsar, target))
    assert 0 < stored < 48  # whole producer batches only: the unfinished ones were dropped
    again = write_batches(iter(batches), options, identity)  # the retry
    assert (again.rows, again.sent, again.skipped) == (100, 100 - stored, stored)
    assert again.per_topic == {target: 100}
    replay = write_batches(iter(batches), options, identity)  # the whole task again: nothing new
    assert (replay.sent, replay.skipped) == (0, 100)
    later = write_batches(iter(batches[:1]), options, WriteIdentity("q1", 6, 3))  # next micro-batch
    assert (later.sent, later.skipped) == (16, 0)
    messages = read_all(services.pulsar, target)
    assert sorted(m.data().decode() for m in messages) == sorted(rows + rows[:16])
    assert {m.producer_name() for m in messages} == {"widehouse-sink-q1-3"}

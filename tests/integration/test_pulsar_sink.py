"""The ``pulsar`` sink against the real broker: routing, content, and what it says without dedup."""

from __future__ import annotations

import datetime as dt
import os
import sys
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

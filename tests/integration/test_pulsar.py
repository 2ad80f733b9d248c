"""Real Pulsar standalone: partitioned topics, produce/consume, admin REST stats."""

from __future__ import annotations

import time
import uuid

import pytest

from widehouse.pulsar import PulsarAdmin, TopicName
from widehouse.pulsar import client as pulsar_client
from widehouse.settings import Settings

pytestmark = pytest.mark.integration


@pytest.fixture
def topic(services: Settings) -> TopicName:
    return TopicName.parse(f"persistent://widehouse-it/core/t-{uuid.uuid4().hex[:8]}")


def test_produce_and_consume_on_a_partitioned_topic(services: Settings, topic: TopicName) -> None:
    import pulsar

    with PulsarAdmin(services.pulsar) as admin:
        assert admin.ensure_partitions(topic, 3) == 3
        assert admin.partition_count(topic) == 3
        client = pulsar_client.connect(services.pulsar)
        try:
            consumer = client.subscribe(
                str(topic),
                "it",
                initial_position=pulsar.InitialPosition.Earliest,
                consumer_type=pulsar.ConsumerType.Shared,
            )
            producer = client.create_producer(str(topic), batching_enabled=True, batching_max_messages=100)
            sent = {(f"u{i % 17}", f'{{"uid": "u{i % 17}", "n": {i}}}'.encode()) for i in range(600)}
            for key, payload in sent:
                producer.send_async(payload, None, partition_key=key)
            producer.flush()
            received: set[tuple[str, bytes]] = set()
            partitions_by_key: dict[str, set[str]] = {}
            while len(received) < len(sent):
                msg = consumer.receive(timeout_millis=10_000)
                received.add((msg.partition_key(), msg.data()))
                partitions_by_key.setdefault(msg.partition_key(), set()).add(msg.topic_name())
                consumer.acknowledge(msg)
            assert received == sent
            # key routing: one partition per key, and the keys spread over every partition
            assert all(len(p) == 1 for p in partitions_by_key.values())
            assert set().union(*partitions_by_key.values()) == {str(p) for p in topic.partitions(3)}
        finally:
            client.close()

        stats = admin.stats(topic)
        assert stats["msgInCounter"] == 600
        assert sum(p["msgInCounter"] for p in stats["partitions"].values()) == 600
        assert "it" in admin.subscriptions(topic)
        admin.delete_topic(topic)
        assert admin.partition_count(topic) == 0


def test_partitions_grow_but_never_shrink(services: Settings, topic: TopicName) -> None:
    with PulsarAdmin(services.pulsar) as admin:
        assert admin.ensure_partitions(topic, 2) == 2
        assert admin.ensure_partitions(topic, 5) == 5
        assert admin.ensure_partitions(topic, 3) == 5
        assert admin.partition_count(topic) == 5
        assert str(topic) in admin.list_partitioned_topics(topic.full_namespace)
        admin.delete_topic(topic)


def test_rate_stats_refresh_within_seconds(services: Settings, topic: TopicName) -> None:
    """The planner reads msgRateIn/msgThroughputIn; the local broker refreshes them every 5 s."""
    with PulsarAdmin(services.pulsar) as admin:
        admin.ensure_partitions(topic, 1)
        client = pulsar_client.connect(services.pulsar)
        try:
            producer = client.create_producer(str(topic))
            deadline = time.monotonic() + 30
            rate = 0.0
            while time.monotonic() < deadline and rate <= 0:
                for _ in range(200):
                    producer.send_async(b"x" * 100, None)
                producer.flush()
                time.sleep(1)
                rate = float(admin.stats(topic).get("msgRateIn", 0.0))
            assert rate > 0
            assert float(admin.stats(topic)["msgThroughputIn"]) > 0
        finally:
            client.close()
            admin.delete_topic(topic)


def test_admin_errors_name_the_request_and_pulsar_answer(services: Settings) -> None:
    from widehouse.errors import PulsarError

    with PulsarAdmin(services.pulsar) as admin, pytest.raises(PulsarError) as info:
        admin.list_topics("no-such-tenant/no-such-namespace")
    message = str(info.value)
    assert "GET http://" in message
    assert "/admin/v2/persistent/no-such-tenant/no-such-namespace" in message
    assert "answered 4" in message


def test_entries_are_examined_from_their_headers_and_refusals_keep_the_broker_reason(
    services: Settings, topic: TopicName
) -> None:
    """examine and entry_info ask with HEAD (no entry body, no gzip): the position, the broker
    index and the batch size still come back, and a refusal still says what the broker said."""
    from widehouse.errors import PulsarError
    from widehouse.pulsar.admin import TopicNotFoundError

    client = pulsar_client.connect(services.pulsar)
    try:
        producer = client.create_producer(
            str(topic), batching_enabled=True, batching_max_messages=3, batching_max_publish_delay_ms=10
        )
        for i in range(6):  # two entries of three messages
            producer.send_async(f"m{i}".encode(), None)
        producer.flush()
        producer.close()
    finally:
        client.close()
    with PulsarAdmin(services.pulsar) as admin:
        first = admin.examine(topic, "earliest")
        last = admin.examine(topic, "latest")
        assert first is not None and last is not None
        assert (first.messages, last.messages) == (3, 3)
        assert last.index == 5 and last.first_index == 3  # the broker numbers messages from 0
        again = admin.entry_info(topic, first.position.ledger, first.position.entry)
        assert (again.position, again.index, again.messages) == (first.position, 2, 3)
        with pytest.raises(PulsarError, match=r"HEAD .*answered 500: LastConfirmedEntry is"):
            admin.entry_info(topic, first.position.ledger, 10_000)
        missing = TopicName.parse(f"persistent://widehouse-it/core/absent-{uuid.uuid4().hex[:8]}")
        with pytest.raises(TopicNotFoundError, match=r"not found: Topic .*absent-.* not found"):
            admin.examine(missing, "latest")


_EXIT_PROBE = """
import sys
from widehouse.pulsar import client as pulsar_client
from widehouse.settings import PulsarSettings
client = pulsar_client.connect(PulsarSettings(sys.argv[1], "http://unused", None))
producer = client.create_producer(sys.argv[2])
producer.send(b"x")
producer.close()
client.close()
"""


def test_a_process_using_the_client_exits_cleanly(services: Settings, topic: TopicName) -> None:
    """With a Python ``logging`` logger the C++ client aborted about one exit in four (SIGABRT,
    "terminate called without an active exception"), which killed stream runs after their last
    batch; twelve clean exits in a row are ~97% certain to catch that."""
    import subprocess
    import sys

    codes = [
        subprocess.run(
            [sys.executable, "-c", _EXIT_PROBE, services.pulsar.service_url, str(topic)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        for _ in range(12)
    ]
    assert [c.returncode for c in codes] == [0] * 12, [c.stderr[-500:] for c in codes if c.returncode]

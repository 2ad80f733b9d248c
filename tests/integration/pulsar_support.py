"""Helpers shared by the integration tests that talk to the real Pulsar broker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from widehouse.errors import PulsarError
from widehouse.pulsar import PulsarAdmin, TopicName
from widehouse.settings import PulsarSettings


def publish(
    client: Any, topic: str, n: int, batch: int = 0, tag: str = "", keys: int | None = None
) -> list[str]:
    """Send ``n`` distinct payloads ``<topic>#<tag><i>``; returns them in order.

    ``batch`` > 0 batches that many messages per entry; message ``i`` has key ``k<i>`` (or
    ``k<i % keys>``), property ``n = i`` and event time ``1000 + i`` ms.
    """
    kwargs: dict[str, Any] = {"batching_enabled": False}
    if batch:
        kwargs = {
            "batching_enabled": True,
            "batching_max_messages": batch,
            "batching_max_publish_delay_ms": 50,
        }
    producer = client.create_producer(topic, **kwargs)
    payloads = [f"{topic}#{tag}{i}" for i in range(n)]
    for i, payload in enumerate(payloads):
        producer.send_async(
            payload.encode(),
            None,
            partition_key=f"k{i % keys}" if keys else f"k{i}",
            properties={"n": str(i)},
            event_timestamp=1000 + i,
        )
    producer.flush()
    producer.close()
    return payloads


def send_exact(client: Any, messages: Iterable[tuple[str, str | None, bytes, int | None]]) -> list[str]:
    """Send each (topic, key, payload, event ms) exactly as given, in order; returns the message ids.

    One unbatched producer per topic; a None key sends no key and a None event time no event time.
    The broker stamps the publish time.
    """
    producers: dict[str, Any] = {}
    ids = []
    try:
        for topic, key, payload, event_ms in messages:
            if topic not in producers:
                producers[topic] = client.create_producer(topic, batching_enabled=False)
            options: dict[str, Any] = {}
            if key is not None:
                options["partition_key"] = key
            if event_ms is not None:
                options["event_timestamp"] = event_ms
            ids.append(str(producers[topic].send(payload, **options)))
    finally:
        for producer in producers.values():
            producer.close()
    return ids


def drop_namespace(admin: PulsarAdmin, namespace: str) -> None:
    """Best-effort removal of a test namespace and its topics (the broker forbids forced deletes)."""
    try:
        for topic in admin.list_partitioned_topics(namespace):
            admin.delete_topic(topic, force=True)
        for topic in admin.list_topics(namespace):
            admin.request(
                "DELETE", TopicName.parse(topic).rest_path, params={"force": "true"}, ok=(200, 204, 404)
            )
        admin.request("DELETE", f"namespaces/{namespace}", ok=(200, 204, 404, 409))
    except PulsarError:
        pass  # a consumer reconnecting in the background may recreate a topic: leave the rest


def read_all(settings: PulsarSettings, topic: str, timeout_ms: int = 5000) -> list[Any]:
    """Every message of ``topic`` (all partitions, each in order), read from the earliest."""
    import pulsar

    from widehouse.pulsar import client as pulsar_client

    client = pulsar_client.connect(settings)
    messages: list[Any] = []
    try:
        for name in client.get_topic_partitions(topic):
            reader = client.create_reader(name, pulsar.MessageId.earliest)
            try:
                while reader.has_message_available():
                    messages.append(reader.read_next(timeout_ms))
            finally:
                reader.close()
    finally:
        client.close()
    return messages


@contextmanager
def app_held_at_marker(script: str, args: list[str], marker: Path, state_dir: Path) -> Iterator[None]:
    """Run a crash test's app (``python <script> app *args``: the test file is its entry point) in
    its own process group until it writes ``marker`` (it then holds a batch open); on leaving the
    block SIGKILL the whole group (the driver and its JVM) mid-batch."""
    env = {**os.environ, "WIDEHOUSE_STATE_DIR": str(state_dir), "PYSPARK_PYTHON": sys.executable}
    proc = subprocess.Popen(
        [sys.executable, script, "app", *args],
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 240
        while not marker.exists():
            if proc.poll() is not None:
                raise AssertionError(f"the app ended early: {proc.stderr.read().decode()[-3000:]}")  # type: ignore[union-attr]
            assert time.monotonic() < deadline, "the app never reached the batch to kill"
            time.sleep(0.2)
        yield
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)

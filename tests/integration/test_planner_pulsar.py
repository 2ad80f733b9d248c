"""The planner against the real Pulsar: live stats as the traffic source, and --apply."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from widehouse.planner import load_plan
from widehouse.planner.live import TopicSelection, live_traffic
from widehouse.planner.observations import ObservationStore
from widehouse.pulsar import PulsarAdmin, TopicName
from widehouse.pulsar import client as pulsar_client
from widehouse.settings import Settings

pytestmark = pytest.mark.integration

RATE = 400  # messages per second produced to the busy topic
SIZE = 500  # bytes per message


def run_plan(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "widehouse", "plan", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "WIDEHOUSE_STATE_DIR": str(state)},
        timeout=180,
        check=False,
    )


@pytest.fixture
def namespace(ns: str) -> str:
    """The suite's fresh namespace (``ns`` in conftest.py), dropped with its topics afterwards."""
    return ns


class Producer(threading.Thread):
    """Sends RATE messages/s of SIZE bytes to a topic until stopped."""

    def __init__(self, settings: Settings, topic: str) -> None:
        super().__init__(daemon=True)
        self.settings, self.topic = settings, topic
        self.stop_event = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            client = pulsar_client.connect(self.settings.pulsar)
            try:
                producer = client.create_producer(self.topic, batching_enabled=True)
                payload = b"x" * SIZE
                while not self.stop_event.is_set():
                    start = time.monotonic()
                    for i in range(RATE // 10):
                        producer.send_async(payload, None, partition_key=str(i))
                    producer.flush()
                    time.sleep(max(0.0, 0.1 - (time.monotonic() - start)))
            finally:
                client.close()
        except BaseException as exc:  # surfaced by the test
            self.error = exc


def wait_for_rate(admin: PulsarAdmin, topic: TopicName, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stats = admin.stats(topic)
        if float(stats.get("msgRateIn", 0)) > RATE / 4:
            return
        time.sleep(1)
    raise AssertionError(f"no stats rate for {topic} within {timeout}s")


def test_live_stats_feed_the_plan_and_apply_grows_partitions(
    services: Settings, namespace: str, tmp_path: Path
) -> None:
    busy = TopicName.parse(f"persistent://{namespace}/busy")
    quiet = TopicName.parse(f"persistent://{namespace}/quiet")
    plain = f"persistent://{namespace}/plain"  # non-partitioned
    with PulsarAdmin(services.pulsar) as admin:
        admin.ensure_partitions(busy, 2)
        admin.ensure_partitions(quiet, 1)
        client = pulsar_client.connect(services.pulsar)
        try:
            client.create_producer(plain).send(b"hello")  # auto-creates a non-partitioned topic
        finally:
            client.close()
        producer = Producer(services, str(busy))
        producer.start()
        try:
            wait_for_rate(admin, busy)
            # the library: two samples one stats interval apart, recorded and smoothed
            store = ObservationStore(tmp_path / "lib")
            traffic = {
                t.topic: t
                for t in live_traffic(
                    services.pulsar,
                    store,
                    TopicSelection(namespaces=(namespace,)),
                    window=3,
                    samples=2,
                    interval=5,
                )
            }
            assert set(traffic) == {str(busy), str(quiet), plain}
            assert RATE / 3 < traffic[str(busy)].msg_rate < RATE * 3
            assert traffic[str(busy)].byte_rate == pytest.approx(traffic[str(busy)].msg_rate * SIZE, rel=0.2)
            assert traffic[str(busy)].partitions == 2
            assert traffic[str(quiet)].msg_rate == 0 and traffic[str(quiet)].partitions == 1
            assert len(store.history(str(busy))) == 2

            # the CLI: plan the namespace from live stats and grow partitions to the plan
            state = tmp_path / "state"
            out = run_plan(
                state,
                "--namespace",
                namespace,
                "--slot-capacity",
                "1M",
                "--partition-capacity",
                "50k",
                "--output",
                str(tmp_path / "plan.json"),
                "--apply",
            )
        finally:
            producer.stop_event.set()
            producer.join(timeout=10)
        assert producer.error is None, producer.error
        assert out.returncode == 0, out.stderr + out.stdout
        plan = load_plan(tmp_path / "plan.json")
        assert set(plan.assignment) == {str(busy), str(quiet), plain}
        # ~400 msg/s x (500 B + 500 B message cost) = ~400 kB/s -> ~8 partitions of 50 kB/s
        assert 3 <= plan.partitions[str(busy)] <= 24
        assert plan.partitions[str(quiet)] == 1
        assert admin.partition_count(busy) == plan.partitions[str(busy)]
        assert admin.partition_count(quiet) == 1
        assert admin.partition_count(TopicName.parse(plain)) == 0  # cannot be partitioned: skipped
        assert "1 skipped (non-partitioned)" in out.stdout
        rows = {line.split()[0]: line.split()[1:] for line in out.stdout.splitlines() if line.strip()}
        assert rows[str(busy)] == ["grown", "2", str(plan.partitions[str(busy)])]
        assert rows[plain] == ["skipped", "0", "0"]
        observations = json.loads((state / "planner" / "observations.json").read_text())
        assert set(observations["topics"]) == {str(busy), str(quiet), plain}


def test_apply_from_a_csv_plan_creates_topics_and_never_shrinks(
    services: Settings, namespace: str, tmp_path: Path
) -> None:
    fresh = f"persistent://{namespace}/fresh"
    wide = TopicName.parse(f"persistent://{namespace}/wide")
    with PulsarAdmin(services.pulsar) as admin:
        admin.ensure_partitions(wide, 6)
    traffic = tmp_path / "traffic.csv"
    traffic.write_text(f"topic,msg_rate,byte_rate\n{fresh},1000,3000000\n{wide},1,100\n")
    out = run_plan(
        tmp_path / "state",
        "--traffic",
        str(traffic),
        "--partition-capacity",
        "1MB",
        "--output",
        str(tmp_path / "plan.json"),
        "--apply",
    )
    assert out.returncode == 0, out.stderr
    plan = load_plan(tmp_path / "plan.json")
    assert plan.partitions == {fresh: 4, str(wide): 1}  # 3.5 MB/s of load; wide is idle
    assert "1 topics created, 0 grown, 1 unchanged, 0 skipped" in out.stdout
    with PulsarAdmin(services.pulsar) as admin:
        assert admin.partition_count(fresh) == 4
        assert admin.partition_count(wide) == 6

    # a replan from the same plan keeps the counts, and applying it again changes nothing
    out = run_plan(
        tmp_path / "state",
        "--traffic",
        str(traffic),
        "--previous",
        str(tmp_path / "plan.json"),
        "--output",
        str(tmp_path / "plan2.json"),
        "--apply",
    )
    assert out.returncode == 0, out.stderr
    assert "0 topics created, 0 grown, 2 unchanged" in out.stdout
    assert "0 topics moved" in out.stdout

"""Dead-letter topics and watermark events of a real stream against real Pulsar.

Hand-made bad logins are streamed with ``WIDEHOUSE_STREAM_DEAD_LETTER=true``; the job is SIGKILLed
right after batch 0 published its side channels (before Spark committed the batch) and run again,
so batch 0 is replayed. Each bad message must be in ``login-DLQ`` exactly once with its reason and
origin, and the control topic must hold one watermark event per batch.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.integration.stream_support import Deployment
from widehouse.pulsar import PulsarAdmin
from widehouse.pulsar import client as pulsar_client
from widehouse.pulsar.dedup import deduplication, enable_deduplication
from widehouse.settings import Settings

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]

LOGIN = "persistent://bigolive/app/login"


def read_all(settings: Settings, topic: str, quiet_ms: int = 3000) -> list[Any]:
    """Every message of ``topic`` from the earliest, until none arrives for ``quiet_ms``."""
    import pulsar

    client = pulsar_client.connect(settings.pulsar)
    try:
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        found = []
        while True:
            try:
                found.append(reader.read_next(timeout_millis=quiet_ms))
            except pulsar.Timeout:
                return found
    finally:
        client.close()


def login(uid: int | None, ts: int) -> bytes:
    body: dict[str, Any] = {"ts": ts, "method": "phone", "result": "success", "latency_ms": 90, "retry": 0}
    if uid is not None:
        body["uid"] = uid
    return orjson.dumps(body)


def test_bad_messages_reach_their_dlq_once_across_a_replay(services: Settings, tmp_path: Path) -> None:
    deployment = Deployment(
        tmp_path,
        extra_env={"WIDEHOUSE_STREAM_DEAD_LETTER": "true", "WIDEHOUSE_STREAM_SINKS": "clickhouse"},
    )
    now = int(time.time() * 1000)
    oversize = b'{"uid": 1, "pad": "' + b"x" * 70_000 + b'"}'
    published = deployment.publish_messages(
        [
            (LOGIN, "11", login(11, now), None),
            (LOGIN, "12", b"{oops", None),
            (LOGIN, None, login(None, now), None),
            (LOGIN, "13", oversize, None),
            (LOGIN, "14", login(14, now), None),
        ]
    )
    # the client prints ids as "(ledger,entry,partition,batch)"; the stream writes "l:e:p:b"
    ids = [p.strip("()").replace(",", ":") for p in published]
    topic = str(next(t.name for t in deployment.catalog.topics if t.origin == LOGIN))
    namespace = topic.split("://", 1)[1].rsplit("/", 1)[0]
    with PulsarAdmin(deployment.settings.pulsar) as admin:
        enable_deduplication(admin, namespace)
        assert deduplication(admin, topic + "-DLQ").enabled
    deployment.plan_groups(1, topics=[topic])

    killed = deployment.stream("--fault", "after-sinks@0:kill")
    assert killed.returncode == -signal.SIGKILL, killed.stdout[-5000:]
    assert deployment.committed_batches("g001") == []  # batch 0 not committed: it will be replayed
    run = deployment.stream()
    assert run.returncode == 0, run.stdout[-5000:]
    assert deployment.committed_batches("g001") == [0]

    letters = read_all(deployment.settings, topic + "-DLQ")
    got = sorted(
        (
            m.properties()["wh_message_id"],
            m.properties()["wh_reason"],
            m.properties()["wh_origin_topic"].rsplit("-partition-", 1)[0],
            m.properties()["wh_payload_bytes"],
            m.properties()["wh_truncated"],
            len(m.data()),
        )
        for m in letters
    )
    want = sorted(
        [
            (ids[1], "malformed_json", topic, "5", "false", 5),
            (ids[2], "missing_key", topic, str(len(login(None, now))), "false", len(login(None, now))),
            (ids[3], "oversize", topic, str(len(oversize)), "true", 4096),
        ]
    )
    assert got == want
    by_id = {m.properties()["wh_message_id"]: m for m in letters}
    assert by_id[ids[1]].data() == b"{oops"
    assert by_id[ids[3]].data() == oversize[:4096]
    assert {m.properties()["wh_group"] for m in letters} == {"g001"}
    assert {m.properties()["wh_batch_id"] for m in letters} == {"0"}
    assert all(m.properties()["wh_detail"] for m in letters if m.properties()["wh_reason"] != "oversize")

    # one watermark event per committed batch, equal to the progress table's group watermark
    control = f"persistent://widehouse-{deployment.suffix}/control/watermarks"
    events = [orjson.loads(m.data()) for m in read_all(deployment.settings, control)]
    assert [(e["app"], e["group"], e["batch_id"]) for e in events] == [("widehouse", "g001", 0)]
    assert events[0]["topics"] == [topic]
    (mark,) = deployment.clickhouse(
        "SELECT toUnixTimestamp64Milli(watermark) AS ms FROM stream_progress FINAL "
        "WHERE topic = '*' AND batch_id = 0"
    )
    assert events[0]["watermark_ms"] == mark["ms"]

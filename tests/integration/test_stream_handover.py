"""A topic moved to another slot group by a new plan continues where its old group committed it.

Real Pulsar, the streaming job as a subprocess, ClickHouse and Delta. Group g001 reads login and
gift_send and commits; a new plan moves gift_send to group g002; more messages are published; both
groups run. Every message must be counted exactly once: the expected sums are written by hand.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.stream_support import GIFT, Deployment
from tests.integration.stream_support import gift_message as _gift
from widehouse.planner import save_plan
from widehouse.planner.model import Group, Plan
from widehouse.settings import Settings

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow, pytest.mark.e2e]

LOGIN = "persistent://bigolive/app/login"


def _login(uid: int, ts: int, result: str = "success") -> tuple[str, str, bytes, int]:
    payload = {"uid": uid, "ts": ts, "method": "phone", "result": result, "app_version": "5.40.0"}
    return LOGIN, str(uid), json.dumps(payload).encode(), ts


def _plan(deployment: Deployment, groups: dict[str, list[str]]) -> None:
    """A hand-written plan: group name -> catalog topics (relocated to the deployment's tenants)."""
    names = {origin: name for name, origin in deployment.topic_origins.items()}
    plan = Plan(
        groups=tuple(Group(g, tuple(names[t] for t in topics), 1.0, 1) for g, topics in groups.items()),
        partitions={names[t]: 2 for topics in groups.values() for t in topics},
        next_group=len(groups) + 1,
    )
    save_plan(plan, deployment.plan_path)


def _totals(rows: dict[tuple[Any, Any], dict[str, Any]]) -> dict[int, tuple[int, int, int]]:
    """Per uid over all hours: (logins, gifts_sent, gift_diamonds_sent)."""
    out: dict[int, tuple[int, int, int]] = {}
    for (uid, _hour), row in rows.items():
        logins, gifts, diamonds = out.get(int(uid), (0, 0, 0))
        out[int(uid)] = (
            logins + (row["logins"] or 0),
            gifts + (row["gifts_sent"] or 0),
            diamonds + (row["gift_diamonds_sent"] or 0),
        )
    return out


def test_a_moved_topic_continues_from_its_old_groups_commit(
    services: Settings, spark: Any, tmp_path: Path
) -> None:
    deployment = Deployment(tmp_path, extra_env={"WIDEHOUSE_STREAM_MAX_MESSAGES": "3"})
    ts = int(time.time() * 1000) - 60_000  # on time, well within the lateness

    # plan 1: g001 reads both topics
    deployment.publish_messages(
        [
            _login(1, ts),
            _login(2, ts),
            _login(2, ts, result="timeout"),
            _gift(1, ts, 10),
            _gift(1, ts, 99),
            _gift(2, ts, 520),
            _gift(2, ts, 1),
        ]
    )
    _plan(deployment, {"g001": [LOGIN, GIFT]})
    first = deployment.stream()
    assert first.returncode == 0, first.stdout[-5000:]
    assert _totals(deployment.clickhouse_rows("user_hourly")) == {1: (1, 2, 109), 2: (1, 2, 521)}
    # the stream keeps off the local embedded metastore (one process at a time: finalize's and daily's)
    assert not Path(deployment.settings.hive.metastore_db_dir).exists()

    # plan 2: gift_send moves to g002; more messages arrive on both topics
    deployment.publish_messages(
        [
            _login(1, ts + 1),
            _gift(1, ts + 1, 1314),
            _gift(2, ts + 1, 9999),
            _gift(3, ts + 1, 10),
        ]
    )
    _plan(deployment, {"g001": [LOGIN], "g002": [GIFT]})
    second = deployment.stream()
    assert second.returncode == 0, second.stdout[-5000:]

    # each message counted once: by hand, logins 1+1 / 1 / 0, gifts 2+1 / 2+1 / 1,
    # diamonds 10+99+1314 / 520+1+9999 / 10
    want = {1: (2, 3, 1423), 2: (1, 3, 10520), 3: (0, 1, 10)}
    assert _totals(deployment.clickhouse_rows("user_hourly")) == want
    assert _totals(deployment.delta_rows(spark, "user_hourly")) == want

    # g002 read only what g001 had not: the 3 new gift_send messages
    rows_in = deployment.clickhouse(
        "SELECT group, sum(rows_in) AS n FROM stream_progress FINAL WHERE topic != '*' GROUP BY group"
    )
    assert {r["group"]: r["n"] for r in rows_in} == {"g001": 7 + 1, "g002": 3}
    assert "continue where other groups of app" in second.stdout


def _offset_log(path: Path, topics: dict[str, dict[str, str]], app: str) -> None:
    """An offset log file as Spark writes it: version, batch metadata, one line per source."""
    path.parent.mkdir(parents=True, exist_ok=True)
    source = {"pulsar": 1, "app": app, "topics": topics}
    path.write_text(f'v1\n{{"batchWatermarkMs":0,"batchTimestampMs":1}}\n{json.dumps(source)}')


def test_checkpoints_are_read_through_hadoop_and_an_unfinished_batch_refuses_the_handover(
    spark: Any, tmp_path: Path
) -> None:
    """Hand-written checkpoints: g001 committed batch 0, planned batch 1 (it read 2 messages of y)."""
    from widehouse.settings import StreamSettings
    from widehouse.source.handover import HandoverError, parse_marks
    from widehouse.stream.spark.handover import start_after

    x, y = "persistent://t/ns/x", "persistent://t/ns/y"
    stream = StreamSettings(app="wh", checkpoint_root=str(tmp_path))
    g001 = tmp_path / "wh" / "g001"
    _offset_log(
        g001 / "offsets" / "0", {x: {"0": "5:1|3|-1|3|earliest"}, y: {"0": "6:4|9|-1|9|earliest"}}, "wh-g001"
    )
    (g001 / "commits").mkdir()
    (g001 / "commits" / "0").write_text('v1\n{"nextBatchWatermarkMs":0}')
    _offset_log(g001 / "offsets" / "1", {x: {"0": "5:1|3|3|3"}, y: {"0": "6:6:1|11|9|11"}}, "wh-g001")

    with pytest.raises(HandoverError, match="slot group g001 has an unfinished batch 1 that read 2 message"):
        start_after(spark, stream, "g002", (y,))
    # x was not read by the unfinished batch: handed over from batch 0
    assert parse_marks(start_after(spark, stream, "g002", (x,)) or "") == parse_marks(
        '{"persistent://t/ns/x": {"0": "5:1|3"}}'
    )

    # once batch 1 is committed, y continues after it, inside the batch entry 6:6
    (g001 / "commits" / "1").write_text('v1\n{"nextBatchWatermarkMs":0}')
    assert parse_marks(start_after(spark, stream, "g002", (y,)) or "") == parse_marks(
        '{"persistent://t/ns/y": {"0": "6:6:1|11"}}'
    )
    # a group whose own checkpoint already has y gets nothing handed over; the group itself neither
    _offset_log(tmp_path / "wh" / "g002" / "offsets" / "0", {y: {"0": "6:2|7|-1|7|earliest"}}, "wh-g002")
    assert start_after(spark, stream, "g002", (y,)) is None
    assert start_after(spark, stream, "g001", (x, y)) is None

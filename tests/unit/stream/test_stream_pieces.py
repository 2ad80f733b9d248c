"""Pure pieces of the streaming job: progress and watermark, fault specs, argument resolution."""

from __future__ import annotations

import argparse
import datetime as dt
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from widehouse.contracts.tables import GROUP_ROW
from widehouse.errors import ConfigError
from widehouse.settings import load_settings
from widehouse.stream.merge import TopicStats
from widehouse.stream.options import Fault, add_arguments, resolve_run
from widehouse.stream.progress import PUBLISH_ALLOWANCE_MS, BatchIdentity, progress_rows

T0 = 1_763_683_200_000  # 2025-11-21T00:00:00Z
UTC = dt.UTC


def at(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, UTC)


def stat(rows_in: int, good: int, bad: int, late: int, max_publish: int) -> TopicStats:
    return TopicStats(rows_in, good, bad, late, max_publish - 5, max_publish - 1000, max_publish)


def test_watermark_is_the_slowest_topic_frontier() -> None:
    identity = BatchIdentity("app", "g001", 7)
    stats = {"a": stat(10, 8, 1, 1, T0 + 50_000), "b": stat(5, 5, 0, 0, T0 + 20_000)}
    metrics = [
        SimpleNamespace(topic="a", rows=10, lag=0, waiting=0),
        SimpleNamespace(topic="b", rows=5, lag=3, waiting=0),
        SimpleNamespace(topic="idle", rows=0, lag=0, waiting=0),
    ]
    rows = progress_rows(identity, stats, metrics, planned_ms=T0 + 60_000, started=0.0)
    by_topic = {r["topic"]: r for r in rows}
    # 'idle' had neither data nor lag: no row of its own, but it does not hold the watermark back
    assert set(by_topic) == {"a", "b", GROUP_ROW}
    # 'b' still has lag: it is only known complete up to the newest message this batch read
    assert by_topic[GROUP_ROW]["watermark"] == at(T0 + 20_000)
    assert all(r["watermark"] == at(T0 + 20_000) for r in rows)
    group = by_topic[GROUP_ROW]
    assert (group["rows_in"], group["rows_out"], group["bad"], group["late"], group["lag"]) == (
        15,
        13,
        1,
        1,
        3,
    )
    assert group["max_publish_time"] == at(T0 + 50_000)
    assert by_topic["a"]["batch_time"] == at(T0 + 60_000)


def test_caught_up_topics_advance_to_the_planning_time_minus_an_allowance() -> None:
    rows = progress_rows(
        BatchIdentity("app", "g", 0),
        {"a": stat(1, 1, 0, 0, T0)},
        [SimpleNamespace(topic="a", rows=1, lag=0, waiting=0)],
        planned_ms=T0 + 90_000,
        started=0.0,
    )
    assert rows[-1]["watermark"] == at(T0 + 90_000 - PUBLISH_ALLOWANCE_MS)


def test_a_topic_with_a_partition_waiting_its_turn_holds_the_watermark() -> None:
    # 'a' read one partition to T0+50s while another, with lag, read nothing this batch: its unread
    # messages may be older, so 'a' is not known complete up to anything
    stats = {"a": stat(10, 10, 0, 0, T0 + 50_000), "b": stat(5, 5, 0, 0, T0 + 20_000)}
    metrics = [
        SimpleNamespace(topic="a", rows=10, lag=40, waiting=1),
        SimpleNamespace(topic="b", rows=5, lag=0, waiting=0),
    ]
    rows = progress_rows(BatchIdentity("app", "g", 1), stats, metrics, planned_ms=T0 + 60_000, started=0.0)
    assert rows[-1]["watermark"] == at(0)
    metrics[0] = SimpleNamespace(topic="a", rows=10, lag=40, waiting=0)
    rows = progress_rows(BatchIdentity("app", "g", 1), stats, metrics, planned_ms=T0 + 60_000, started=0.0)
    assert rows[-1]["watermark"] == at(T0 + 50_000)


def test_an_empty_batch_still_reports_the_group() -> None:
    rows = progress_rows(BatchIdentity("app", "g", 3), {}, [], planned_ms=T0, started=0.0)
    assert [r["topic"] for r in rows] == [GROUP_ROW]
    assert rows[0]["rows_in"] == 0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("before-sinks@3", Fault("before-sinks", 3, False)),
        ("after-delta@0:kill", Fault("after-delta", 0, True)),
        ("clickhouse-insert@12:raise", Fault("clickhouse-insert", 12, False)),
    ],
)
def test_fault_specs(text: str, expected: Fault) -> None:
    assert Fault.parse(text) == expected


@pytest.mark.parametrize("text", ["nowhere@1", "before-sinks", "before-sinks@x", "after-sinks@1:explode"])
def test_bad_fault_specs_name_the_spec(text: str) -> None:
    with pytest.raises(ConfigError, match=f"--fault '{text}'"):
        Fault.parse(text)


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


def test_groups_come_from_the_plan(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {
                "groups": [
                    {"name": "g001", "topics": ["persistent://a/b/c"], "load": 1.0, "cores": 1},
                    {"name": "g002", "topics": ["persistent://a/b/d"], "load": 1.0, "cores": 1},
                ],
                "partitions": {"persistent://a/b/c": 1, "persistent://a/b/d": 1},
            }
        )
    )
    settings = load_settings({"WIDEHOUSE_STATE_DIR": str(tmp_path)})
    groups, options = resolve_run(
        _args("--plan", str(plan), "--group", "g002", "--available-now"), settings.state_dir
    )
    assert [(g.name, g.topics) for g in groups] == [("g002", ("persistent://a/b/d",))]
    assert options.available_now
    groups, _ = resolve_run(_args("--all-groups"), settings.state_dir)  # default plan: <state>/plan.json
    assert [g.name for g in groups] == ["g001", "g002"]


def test_argument_errors_say_what_to_do(tmp_path: Path) -> None:
    settings = load_settings({"WIDEHOUSE_STATE_DIR": str(tmp_path)})
    with pytest.raises(ConfigError, match=r"--group NAME .* or --all-groups"):
        resolve_run(_args(), settings.state_dir)
    with pytest.raises(ConfigError, match=r"--plan .*plan.json: no such file"):
        resolve_run(_args("--group", "g001"), settings.state_dir)
    with pytest.raises(ConfigError, match="--topics needs exactly one --group"):
        resolve_run(_args("--topics", "persistent://a/b/c"), settings.state_dir)
    groups, _ = resolve_run(
        _args("--topics", "persistent://a/b/c, persistent://a/b/d", "--group", "adhoc"), settings.state_dir
    )
    assert groups[0].topics == ("persistent://a/b/c", "persistent://a/b/d")

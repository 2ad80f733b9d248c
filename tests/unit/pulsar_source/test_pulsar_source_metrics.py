"""Per-topic rows and lag come from the batch's entry in Spark's offset log."""

from __future__ import annotations

import json

import pytest

from widehouse.errors import PulsarError
from widehouse.pulsar.positions import Mark, Position, TopicPartition
from widehouse.source.metrics import offsets_from_log, planned_ms
from widehouse.source.offsets import PartitionOffset, SourceOffset, topic_metrics

A = "persistent://t/ns/a"


def log_text(*sources: object) -> str:
    meta = {"batchWatermarkMs": 0, "batchTimestampMs": 1, "conf": {}}
    lines = ["v1", json.dumps(meta)]
    lines += [s if isinstance(s, str) else json.dumps(s) for s in sources]
    return "\n".join(lines)


def offset(app: str, rows: int) -> SourceOffset:
    return SourceOffset(
        {TopicPartition(A, 0): PartitionOffset(Mark(Position(1, 1), 10 + rows), 10, 50)}, app=app
    )


def test_the_pulsar_line_is_found_among_other_sources() -> None:
    text = log_text({"kafka": {"x": {"0": 5}}}, "-", offset("g1", 7).to_json())
    found = offsets_from_log(text)
    assert found == offset("g1", 7)
    [metrics] = topic_metrics(found)
    assert (metrics.rows, metrics.lag) == (7, 33)


def test_several_pulsar_sources_need_the_app_id() -> None:
    text = log_text(offset("g1", 1).to_json(), offset("g2", 2).to_json())
    with pytest.raises(PulsarError, match="several pulsar sources"):
        offsets_from_log(text)
    assert offsets_from_log(text, app_id="g2") == offset("g2", 2)
    with pytest.raises(PulsarError, match="of app g3"):
        offsets_from_log(text, app_id="g3")


def test_the_planning_time_is_the_metadata_line_s_batch_timestamp() -> None:
    assert planned_ms(log_text(offset("g1", 1).to_json())) == 1
    assert planned_ms("v1\n{}\n") is None  # an odd log: the caller falls back
    assert planned_ms("v1") is None
    assert planned_ms("v1\nnot json") is None

"""Positions, marks and offsets: exact comparisons and a JSON form that survives the checkpoint."""

from __future__ import annotations

import json

import pytest

from widehouse.errors import ConfigError, PulsarError
from widehouse.pulsar.positions import EntryInfo, Mark, Position, TopicPartition
from widehouse.source.offsets import (
    PartitionOffset,
    PositionSpec,
    SourceOffset,
    format_message_id,
    parse_message_id,
    parse_offset_spec,
    topic_metrics,
)

A = "persistent://t/ns/a"
B = "persistent://t/ns/b"


def test_whole_entry_position_covers_every_message_of_the_entry() -> None:
    mark = Mark(Position(7, 3), 41)
    assert mark.covers(7, 3, -1) and mark.covers(7, 3, 0) and mark.covers(7, 3, 99)
    assert mark.covers(7, 2, 5) and mark.covers(6, 100, -1)
    assert not mark.covers(7, 4, -1) and not mark.covers(8, 0, 0)


def test_position_inside_a_batch_covers_up_to_its_batch_index() -> None:
    mark = Mark(Position(7, 3, 2), 41)
    assert mark.covers(7, 3, 0) and mark.covers(7, 3, 2)
    assert not mark.covers(7, 3, 3) and not mark.covers(7, 4, 0)


def test_earliest_covers_nothing() -> None:
    assert not Mark(None, -1).covers(0, 0, -1)
    assert Mark(None, 4).encode_position() == "earliest"


def test_position_text_round_trip() -> None:
    for text in ("12:5", "12:5:3", "0:0"):
        assert str(Position.parse(text)) == text
    with pytest.raises(ValueError, match="not a position"):
        Position.parse("12")


def test_entry_info_marks_the_whole_entry() -> None:
    info = EntryInfo(Position(9, 4), index=20, messages=5)
    assert info.first_index == 16
    assert info.mark == Mark(Position(9, 4), 20)


@pytest.mark.parametrize(
    "entry",
    [
        PartitionOffset(Mark(Position(3, 9), 99), 80, 120),
        PartitionOffset(Mark(Position(3, 9, 4), 99), 80, 120, None),
        PartitionOffset(Mark(Position(3, 9), 99), 80, 99, Position(3, 1, 2)),
        PartitionOffset(Mark(None, -1), -1, -1, None),
    ],
)
def test_partition_offset_round_trip(entry: PartitionOffset) -> None:
    assert PartitionOffset.decode(entry.encode()) == entry


def test_partition_offset_counts_rows_and_lag() -> None:
    entry = PartitionOffset(Mark(Position(3, 9), 99), 80, 120)
    assert (entry.rows, entry.lag) == (19, 21)
    assert entry.start_mark is None
    started = PartitionOffset(Mark(Position(3, 9), 99), 80, 99, None)
    assert started.start_mark == Mark(None, 80)


def test_source_offset_json_is_plain_and_round_trips() -> None:
    offset = SourceOffset(
        {
            TopicPartition(A, 0): PartitionOffset(Mark(Position(1, 2), 10), 5, 12),
            TopicPartition(A, 1): PartitionOffset(Mark(Position(1, 3, 0), 11), 11, 11, Position(1, 1)),
            TopicPartition(B, -1): PartitionOffset(Mark(None, -1), -1, -1, None),
        },
        app="g1",
    )
    data = offset.to_json()
    text = json.dumps(data)  # what Spark writes to the offset log
    assert json.loads(text) == data
    assert set(data["topics"]) == {A, B} and set(data["topics"][A]) == {"0", "1"}
    assert SourceOffset.from_json(text) == offset
    assert SourceOffset.from_json(data).same_positions(offset)


def test_initial_offset_is_flagged() -> None:
    initial = SourceOffset(app="g1", initial=True)
    data = initial.to_json()
    assert data["init"] is True
    assert SourceOffset.from_json(data).initial
    assert not SourceOffset.from_json(data).same_positions(SourceOffset(app="g1"))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("{not json", "not JSON"),
        ({"kafka": 1}, "not a Pulsar source offset"),
        ({"pulsar": 1, "topics": {A: {"0": "garbage"}}}, f"bad entry for {A} partition 0"),
        ({"pulsar": 1, "topics": {A: {"x": "1:2|1|1|1"}}}, "bad entry"),
        ({"pulsar": 1, "topics": []}, "'topics' must be an object"),
    ],
)
def test_bad_offsets_are_named(data: object, message: str) -> None:
    with pytest.raises(PulsarError, match=message):
        SourceOffset.from_json(data)  # type: ignore[arg-type]


def test_same_positions_ignores_lag_but_not_marks() -> None:
    one = SourceOffset({TopicPartition(A, 0): PartitionOffset(Mark(Position(1, 2), 10), 5, 12)})
    later_lag = SourceOffset({TopicPartition(A, 0): PartitionOffset(Mark(Position(1, 2), 10), 10, 30)})
    moved = SourceOffset({TopicPartition(A, 0): PartitionOffset(Mark(Position(1, 3), 11), 10, 30)})
    assert one.same_positions(later_lag)
    assert not one.same_positions(moved)


def test_topic_metrics_sum_partitions() -> None:
    offset = SourceOffset(
        {
            TopicPartition(A, 0): PartitionOffset(Mark(Position(1, 2), 10), 5, 12),
            TopicPartition(A, 1): PartitionOffset(Mark(Position(2, 2), 20), 20, 25),
            TopicPartition(B, -1): PartitionOffset(Mark(Position(3, 2), 7), -1, 7, None),
        }
    )
    metrics = {m.topic: m for m in topic_metrics(offset)}
    assert (metrics[A].partitions, metrics[A].rows, metrics[A].lag) == (2, 5, 7)
    assert metrics[A].waiting == 1  # partition 1 has lag and read nothing
    assert (metrics[B].rows, metrics[B].lag) == (8, 0)


def test_message_ids_in_the_column_format_parse_back() -> None:
    text = format_message_id(12, 5, 3, 2)
    assert text == "12:5:3:2"
    assert parse_message_id(text) == Position(12, 5, 2)
    assert parse_message_id("12:5") == Position(12, 5)
    assert parse_message_id(format_message_id(12, 5, -1, -1)) == Position(12, 5)
    with pytest.raises(ValueError, match="not a message id"):
        parse_message_id("12:5:3")


def test_offset_spec_words_and_json() -> None:
    assert parse_offset_spec("earliest", "startingOffsets").default == PositionSpec("earliest")
    spec = parse_offset_spec(json.dumps({A: "latest", B: {"0": "12:5", "2": "earliest"}}), "startingOffsets")
    assert spec.for_partition(TopicPartition(A, 3)) == PositionSpec("latest")
    assert spec.for_partition(TopicPartition(B, 0)) == PositionSpec("at", Position(12, 5))
    assert spec.for_partition(TopicPartition(B, 1)) == PositionSpec("earliest")  # default
    assert spec.for_partition(TopicPartition("persistent://t/ns/c", -1)) == PositionSpec("earliest")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("newest", "startingOffsets='newest' is invalid"),
        ("{oops", "startingOffsets.*not valid JSON"),
        ('{"a": "earliest"}', "startingOffsets: 'a' is not a full Pulsar topic name"),
        (json.dumps({A + "-partition-1": "earliest"}), "use the partitioned topic"),
        (json.dumps({A: {"x": "earliest"}}), "partition 'x' of .* is not a number"),
        (json.dumps({A: "12"}), "not a message id"),
        (json.dumps({A: 5}), "expected a string"),
    ],
)
def test_bad_offset_specs_name_the_option(value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_offset_spec(value, "startingOffsets")


def test_ending_offsets_reject_earliest() -> None:
    with pytest.raises(ConfigError, match="endingOffsets"):
        parse_offset_spec("earliest", "endingOffsets", allowed=("latest",))

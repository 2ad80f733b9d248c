"""Topic handover between slot groups: which mark a moved partition starts after (hand-written offsets)."""

from __future__ import annotations

import pytest

from widehouse.errors import ConfigError
from widehouse.pulsar.positions import EntryInfo, Mark, Position, TopicPartition
from widehouse.settings import PulsarSettings
from widehouse.source.handover import (
    GroupCheckpoint,
    HandoverError,
    HandoverStart,
    encode_marks,
    handover_marks,
    parse_marks,
    resolve_handover,
)
from widehouse.source.offsets import PartitionOffset, SourceOffset
from widehouse.source.options import parse_options

X = "persistent://t/ns/x"
Y = "persistent://t/ns/y"
Z = "persistent://t/ns/z"
PULSAR = PulsarSettings("pulsar://broker:6650", "http://broker:8080")


def offset(app: str, **entries: str) -> SourceOffset:
    """``entries``: ``<topic letter><partition>`` -> encoded partition offset (``x0="5:3|9|4|9"``)."""
    parts = {}
    for key, text in entries.items():
        topic = {"x": X, "y": Y, "z": Z}[key[0]]
        parts[TopicPartition(topic, int(key[1:]) if key[1:] != "n" else -1)] = PartitionOffset.decode(text)
    return SourceOffset(parts, app=app)


def test_a_moved_topic_continues_after_its_old_group_and_only_moved_topics_are_handed_over() -> None:
    a = GroupCheckpoint(
        "g001", offset("wh-g001", x0="7:4|20|15|20", y0="7:9:2|41|30|50", y1="8:1|12|12|12"), 3
    )
    marks = handover_marks("g002", [Y], [a])
    assert marks == {
        TopicPartition(Y, 0): Mark(Position(7, 9, 2), 41),  # exact, inside a batch entry
        TopicPartition(Y, 1): Mark(Position(8, 1), 12),
    }


def test_the_newest_commit_wins_when_a_topic_moved_twice_and_the_group_itself_is_ignored() -> None:
    a = GroupCheckpoint("g001", offset("wh-g001", y0="3:5|10|0|10"), 7)
    c = GroupCheckpoint("g003", offset("wh-g003", y0="3:9|25|10|25"), 2)
    own = GroupCheckpoint("g002", offset("wh-g002", y0="3:12|40|25|40"), 9)
    assert handover_marks("g002", [Y], [a, c, own]) == {TopicPartition(Y, 0): Mark(Position(3, 9), 25)}
    assert handover_marks("g002", [Y], [c, a]) == {TopicPartition(Y, 0): Mark(Position(3, 9), 25)}


def test_a_topic_no_group_committed_is_not_handed_over() -> None:
    a = GroupCheckpoint("g001", offset("wh-g001", x0="1:1|1|0|1"), 0)
    never = GroupCheckpoint("g004", None)
    assert handover_marks("g002", [Z], [a, never]) == {}
    assert handover_marks("g002", [], [a]) == {}


def test_a_single_partition_name_selects_only_that_partition() -> None:
    a = GroupCheckpoint("g001", offset("wh-g001", y0="2:2|5|0|5", y1="2:3|6|0|6"), 0)
    assert handover_marks("g002", [f"{Y}-partition-1"], [a]) == {
        TopicPartition(Y, 1): Mark(Position(2, 3), 6)
    }


def test_an_unfinished_batch_that_read_the_topic_is_refused_with_a_clear_message() -> None:
    committed = offset("wh-g001", x0="1:4|8|4|8", y0="1:5|10|6|10")
    pending = offset("wh-g001", x0="1:4|8|8|8", y0="1:7|14|10|14")  # batch 5 read 4 messages of y
    a = GroupCheckpoint("g001", committed, 4, pending, 5)
    with pytest.raises(HandoverError) as info:
        handover_marks("g002", [Y], [a])
    message = str(info.value)
    assert "slot group g001 has an unfinished batch 5 that read 4 message(s)" in message
    assert f"{Y}-partition-0" in message and "restart group g001 once" in message
    # the same unfinished batch read nothing of x: x can be handed over
    assert handover_marks("g002", [X], [a]) == {TopicPartition(X, 0): Mark(Position(1, 4), 8)}


def test_an_unfinished_first_batch_without_any_commit_is_refused_too() -> None:
    a = GroupCheckpoint("g001", None, None, offset("wh-g001", yn="1:2|2|-1|2|earliest"), 0)
    with pytest.raises(HandoverError, match="unfinished batch 0 that read 3 message"):
        handover_marks("g002", [Y], [a])


TP = TopicPartition(Y, 0)


def test_resolve_uses_the_mark_while_its_messages_are_there() -> None:
    mark = Mark(Position(7, 9, 2), 41)
    first, end = EntryInfo(Position(7, 0), 5, 5), EntryInfo(Position(7, 20), 90, 3)
    assert resolve_handover(TP, mark, first, end) == HandoverStart(mark)


def test_resolve_waits_for_an_empty_partition() -> None:
    assert resolve_handover(TP, Mark(Position(7, 9), 41), None, None) == HandoverStart(None)


def test_resolve_a_mark_just_before_the_first_retained_message_is_the_earliest() -> None:
    first, end = EntryInfo(Position(9, 0), 44, 3), EntryInfo(Position(9, 3), 50)  # first index 42
    assert resolve_handover(TP, Mark(Position(7, 9), 41), first, end) == HandoverStart(Mark(None, 41))


def test_resolve_reports_messages_trimmed_after_the_mark_as_data_loss() -> None:
    first, end = EntryInfo(Position(9, 0), 50, 1), EntryInfo(Position(9, 3), 53)
    decision = resolve_handover(TP, Mark(Position(7, 9), 41), first, end)
    assert decision.start == Mark(None, 49) and decision.data_loss
    assert decision.problem is not None and "8 message(s)" in decision.problem


def test_resolve_a_recreated_topic_starts_at_its_earliest() -> None:
    first, end = EntryInfo(Position(30, 0), 0, 1), EntryInfo(Position(30, 4), 4)
    decision = resolve_handover(TP, Mark(Position(7, 9), 41), first, end)
    assert decision.start == Mark(None, -1) and not decision.data_loss
    assert decision.problem is not None and "was recreated" in decision.problem


def test_the_start_after_option_round_trips_and_names_bad_entries() -> None:
    marks = {TopicPartition(Y, 0): Mark(Position(7, 9, 2), 41), TopicPartition(X, -1): Mark(None, 4)}
    text = encode_marks(marks)
    assert text == '{"persistent://t/ns/x":{"-1":"earliest|4"},"persistent://t/ns/y":{"0":"7:9:2|41"}}'
    assert parse_marks(text) == marks
    options = parse_options({"topics": Y, "appId": "wh-g002", "startAfter": text}, PULSAR)
    assert options.start_after == marks
    with pytest.raises(ConfigError, match=r"startAfter: .*partition '0': '7:9' is not"):
        parse_marks('{"persistent://t/ns/y": {"0": "7:9"}}')
    with pytest.raises(ConfigError, match="option startAfter is not valid JSON"):
        parse_marks("{")
    with pytest.raises(ConfigError, match="option startAfter is for streaming queries"):
        parse_options({"topics": Y, "startAfter": text}, PULSAR, batch=True)


def test_a_stream_with_start_after_gets_its_schema() -> None:
    """Spark asks the data source for its schema before it makes the stream reader: the schema step
    must not apply the batch-only rules (it refused ``startAfter``, so every handed-over group
    failed to start)."""
    from widehouse.source.spark import PulsarDataSource

    marks = encode_marks({TopicPartition(Y, 0): Mark(Position(7, 9, 2), 41)})
    source = PulsarDataSource(
        {"topics": Y, "startAfter": marks, "serviceUrl": PULSAR.service_url, "adminUrl": PULSAR.admin_url}
    )
    assert "value" in source.schema()

"""Dead letters and watermark events, as built from a batch's rows (no Pulsar)."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from widehouse.contracts.tables import QUARANTINE_SHAPE
from widehouse.settings import StreamSettings
from widehouse.stream.control import WatermarkEvent, control_topic, event_from_progress
from widehouse.stream.deadletter import dead_letter_topic, dead_letters, producer_name
from widehouse.stream.producers import sequence_id

T0 = dt.datetime(2026, 11, 22, 9, 30, tzinfo=dt.UTC)  # `date -u -d 2026-11-22T09:30Z +%s` = 1795339800
LOGIN = "persistent://social/events/login"


def quarantine(rows: list[dict[str, object]]) -> pa.Table:
    base = {"app": "wh", "group": "g001", "batch_id": 7, "detail": ""}
    return pa.Table.from_pylist([{**base, **r} for r in rows], schema=QUARANTINE_SHAPE.arrow_schema())


def test_dead_letter_topic_rule() -> None:
    assert dead_letter_topic(LOGIN) == "persistent://social/events/login-DLQ"
    assert dead_letter_topic(LOGIN + "-partition-3") == "persistent://social/events/login-DLQ"
    assert producer_name("wh", "g001", LOGIN + "-partition-0") == "wh-dlq.wh.g001.login"


def test_sequence_ids_grow_with_the_batch_and_the_row() -> None:
    assert sequence_id(0, 0) == 0
    assert sequence_id(1, 0) == 4294967296
    assert sequence_id(1, 5) == 4294967301
    assert sequence_id(2, 0) > sequence_id(1, 4294967295)
    with pytest.raises(ValueError, match="index 4294967296"):
        sequence_id(1, 1 << 32)


def test_quarantine_rows_become_dead_letters_per_topic_without_overflow_rows() -> None:
    big = b"{" + b"x" * 4095
    table = quarantine(
        [
            {
                "topic": LOGIN,
                "message_id": "12:3:-1",
                "publish_time": T0,
                "reason": "malformed_json",
                "detail": "line 1",
                "payload": b"{oops",
                "payload_bytes": 5,
            },
            {
                "topic": LOGIN,
                "message_id": "12:1:-1",
                "publish_time": T0,
                "reason": "oversize",
                "payload": big,
                "payload_bytes": 9000,
            },
            {
                "topic": "persistent://social/events/gift",
                "message_id": "merge:user_hourly.gifts:u1@2026-11-22T09#0",
                "publish_time": T0,
                "reason": "overflow",
                "payload": b"{}",
                "payload_bytes": 2,
            },
        ]
    )
    found = list(dead_letters(table, "wh", "g001", 7))
    assert [(d.origin, d.topic, d.producer) for d in found] == [
        (LOGIN, "persistent://social/events/login-DLQ", "wh-dlq.wh.g001.login")
    ]
    first, second = found[0].messages  # in message id order
    assert first.sequence_id == (7 << 32) and second.sequence_id == (7 << 32) + 1
    assert first.payload == big and first.key == "12:1:-1"
    assert first.event_time_ms == int(T0.timestamp() * 1000)
    assert first.properties == {
        "wh_reason": "oversize",
        "wh_detail": "",
        "wh_origin_topic": LOGIN,
        "wh_message_id": "12:1:-1",
        "wh_publish_time": "1795339800000",
        "wh_payload_bytes": "9000",
        "wh_truncated": "true",
        "wh_app": "wh",
        "wh_group": "g001",
        "wh_batch_id": "7",
    }
    assert second.payload == b"{oops"
    assert second.properties["wh_reason"] == "malformed_json"
    assert second.properties["wh_detail"] == "line 1"
    assert second.properties["wh_truncated"] == "false"


def test_watermark_event_from_the_group_row_and_back() -> None:
    progress = [
        {"topic": LOGIN, "watermark": T0},
        {"topic": "*", "watermark": T0},
    ]
    event = event_from_progress("wh", "g001", 3, [LOGIN, "persistent://a/b/c"], progress)
    assert (event.app, event.group, event.batch_id, event.watermark_ms) == ("wh", "g001", 3, 1795339800000)
    assert event.topics == ("persistent://a/b/c", LOGIN)
    assert WatermarkEvent.from_json(event.to_json()) == event
    assert event.watermark == T0


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"{not json", "not JSON"),
        (b'{"kind": "other"}', "not a watermark event"),
        (b'{"kind": "watermark", "app": "wh"}', "lacks or mistypes"),
        (
            b'{"kind": "watermark", "app": "a", "group": "g", "batch_id": "x", '
            b'"watermark_ms": 1, "topics": []}',
            "lacks or mistypes",
        ),
    ],
)
def test_bad_events_say_what_is_wrong(data: bytes, expected: str) -> None:
    with pytest.raises(ValueError, match=expected):
        WatermarkEvent.from_json(data)


def test_control_topic_follows_the_tenant_suffix() -> None:
    plain = StreamSettings(checkpoint_root="/c")
    assert control_topic(plain) == "persistent://widehouse/control/watermarks"
    moved = StreamSettings(checkpoint_root="/c", tenant_suffix="t1")
    assert control_topic(moved) == "persistent://widehouse-t1/control/watermarks"
    assert control_topic(StreamSettings(checkpoint_root="/c", control_topic=None)) is None

"""The reference parser and event-time rules: what is accepted, late, or quarantined and why."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from catalog_samples import Writer

from widehouse.catalog import (
    DEFAULT_RULES,
    Accepted,
    EventTimeRules,
    Rejected,
    Topic,
    classify_event_time,
    load_catalog,
    parse_event,
)
from widehouse.catalog.eventtime import day_start, hour_start, iso_utc, parse_duration_ms

NOW = 1_778_000_000_000


@pytest.fixture
def topic(write_catalog: Writer) -> Topic:
    return load_catalog(write_catalog()).topic("persistent://acme/shop/pay")


def good(**changes: object) -> dict[str, object]:
    event: dict[str, object] = {
        "uid": 10000001,
        "ts": NOW - 5_000,
        "amount": 12,
        "city": "Paris",
        "item": {"sku": "A1", "price": 2000},
        "tags": ["x", None],
        "attrs": {"k": 1},
    }
    event.update(changes)
    return event


def parse(
    topic: Topic, payload: bytes | dict[str, object], publish: int = NOW, limit: int = 65536
) -> Accepted | Rejected:
    raw = payload if isinstance(payload, bytes) else orjson.dumps(payload)
    return parse_event(topic, raw, publish, DEFAULT_RULES, limit)


def test_a_good_event_is_typed_and_unknown_fields_are_ignored(topic: Topic) -> None:
    result = parse(topic, good(extra_field={"a": 1}, another=[1]))
    assert isinstance(result, Accepted)
    assert result.row == {
        "uid": 10000001,
        "ts": NOW - 5_000,
        "amount": 12.0,  # a JSON integer in a double field is a double
        "city": "Paris",
        "item": {"sku": "A1", "price": 2000},
        "tags": ["x", None],
        "attrs": {"k": 1},
    }
    assert isinstance(result.row["amount"], float)
    assert (result.key, result.event_ms, result.late) == (10000001, NOW - 5_000, False)


def test_absent_or_null_optional_fields_are_none(topic: Topic) -> None:
    result = parse(topic, {"uid": 1, "ts": NOW, "item": {"price": None}})
    assert isinstance(result, Accepted)
    assert result.row["city"] is None and result.row["item"] == {"sku": None, "price": None}


@pytest.mark.parametrize(
    ("payload", "reason", "detail"),
    [
        (b"", "empty_payload", "empty"),
        (b'{"uid": 1, "ts": 2, "pad": "' + b"a" * 70000 + b'"}', "oversize", "max_payload_bytes 65536"),
        (b'{"uid": 1, "ts": 2, "city": "caf\xc3\x28"}', "invalid_utf8", "byte"),
        (b'{"uid": 1, "ts": ', "malformed_json", ""),
        (b'{"uid": 1}}', "malformed_json", ""),
        (b"[1, 2]", "not_an_object", "list"),
        (orjson.dumps({"ts": NOW}), "missing_key", "'uid'"),
        (orjson.dumps({"uid": None, "ts": NOW}), "missing_key", "'uid'"),
        (orjson.dumps({"uid": 1}), "missing_event_time", "'ts'"),
        (orjson.dumps(good(ts=None)), "missing_event_time", "'ts'"),
        (orjson.dumps(good(uid="abc")), "wrong_type", "uid"),
        (orjson.dumps(good(amount="12")), "wrong_type", "amount: '12' is not a double"),
        (orjson.dumps(good(amount=True)), "wrong_type", "amount"),
        (orjson.dumps(good(item={"sku": "a", "price": 1.5})), "wrong_type", "item.price: 1.5 is not a long"),
        (orjson.dumps(good(item="flat")), "wrong_type", "item: 'flat' is not an object"),
        (orjson.dumps(good(tags=["a", 3])), "wrong_type", "tags[1]: 3 is not a string"),
        (orjson.dumps(good(attrs={"k": "v"})), "wrong_type", "attrs['k']"),
        (orjson.dumps(good(attrs=[1])), "wrong_type", "attrs"),
        (orjson.dumps(good(ts="2026-01-01")), "wrong_type", "ts"),
        (orjson.dumps(good(uid=2**63)), "wrong_type", "uid"),
        (orjson.dumps(good(ts=0)), "absurd_event_time", "event time 0"),
        (orjson.dumps(good(ts=-5)), "absurd_event_time", ""),
        (orjson.dumps(good(ts=NOW + 6 * 60_000)), "absurd_event_time", ""),
        (orjson.dumps(good(ts=NOW - 8 * 86_400_000)), "absurd_event_time", ""),
    ],
)
def test_rejections_name_the_reason(topic: Topic, payload: bytes, reason: str, detail: str) -> None:
    result = parse(topic, payload)
    assert isinstance(result, Rejected), result
    assert result.reason == reason
    assert detail in result.detail


def test_checks_run_in_contract_order(topic: Topic) -> None:
    # oversize wins over invalid UTF-8, which wins over malformed JSON; missing key over wrong types
    assert parse(topic, b"\xff" * 70000).reason == "oversize"  # type: ignore[union-attr]
    assert parse(topic, b'{"uid": \xff').reason == "invalid_utf8"  # type: ignore[union-attr]
    assert parse(topic, orjson.dumps({"ts": "x", "amount": "y"})).reason == "missing_key"  # type: ignore[union-attr]
    assert parse(topic, orjson.dumps(good(ts=0, amount="x"))).reason == "wrong_type"  # type: ignore[union-attr]


def test_late_events_are_accepted_but_marked(topic: Topic) -> None:
    result = parse(topic, good(ts=NOW - 3 * 3_600_000))
    assert isinstance(result, Accepted) and result.late


@pytest.mark.parametrize(
    ("behind_ms", "verdict"),
    [
        (0, "ok"),
        (3_600_000, "ok"),  # exactly the lateness: still on time
        (3_600_001, "late"),
        (7 * 86_400_000, "late"),
        (7 * 86_400_000 + 1, "bad"),
        (-300_000, "ok"),  # exactly max_future ahead
        (-300_001, "bad"),
    ],
)
def test_event_time_boundaries(behind_ms: int, verdict: str) -> None:
    assert classify_event_time(NOW - behind_ms, NOW) == verdict


def test_missing_and_non_positive_event_times_are_bad() -> None:
    assert classify_event_time(None, NOW) == "bad"
    assert classify_event_time(0, NOW) == "bad"
    rules = EventTimeRules(lateness_ms=60_000, max_future_ms=0, max_age_ms=120_000)
    assert classify_event_time(NOW - 61_000, NOW, rules) == "late"
    assert classify_event_time(NOW + 1, NOW, rules) == "bad"
    with pytest.raises(ValueError, match="longer than lateness"):
        EventTimeRules(lateness_ms=10, max_future_ms=0, max_age_ms=5)


def test_periods_are_utc_hours_and_days() -> None:
    moment = 1_778_417_999_999  # 2026-05-10T12:59:59.999Z
    assert iso_utc(hour_start(moment)) == "2026-05-10T12:00:00Z"
    assert iso_utc(day_start(moment)) == "2026-05-10T00:00:00Z"
    assert iso_utc(moment) == "2026-05-10T12:59:59.999Z"


@pytest.mark.parametrize(
    ("text", "ms"), [("250ms", 250), ("90s", 90_000), ("5m", 300_000), ("1h", 3_600_000), ("7d", 604_800_000)]
)
def test_durations(text: str, ms: int) -> None:
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["1hour", "", "5", 5, "-1h", True])
def test_bad_durations(text: object) -> None:
    with pytest.raises(ValueError, match=r"duration|unit"):
        parse_duration_ms(text)


def test_catalog_rules_and_payload_limit_come_from_catalog_yaml(write_catalog: Writer) -> None:
    root: Path = write_catalog(
        {
            "schemas/catalog.yaml": "name: t\nlimits: {max_payload_bytes: 1024}\n"
            "event_time: {lateness: 30m, max_age: 2d}\n"
        }
    )
    catalog = load_catalog(root)
    assert catalog.max_payload_bytes == 1024
    assert catalog.rules == EventTimeRules(
        lateness_ms=1_800_000, max_future_ms=300_000, max_age_ms=172_800_000
    )

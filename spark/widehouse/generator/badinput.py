"""The classes of bad input the generator injects, and what the pipeline must do with each.

Every injected message carries its class in the Pulsar message property ``wh_label`` (good,
on-time events carry no label). The policy below is the contract the streaming job is tested
against (the manifest repeats it):

===================== =========== ====================== ==========================================
label                 policy      quarantine reason      how the generator makes it
===================== =========== ====================== ==========================================
unknown_fields        accept      --                     a good event plus fields the catalog does
                                                         not declare (forward-compatible producers:
                                                         accepted, extra fields ignored)
malformed_json        quarantine  malformed_json         truncated, ``=`` for ``:``, or a trailing brace
wrong_type            quarantine  wrong_type             one declared field gets a value of another type
missing_key           quarantine  missing_key            the key field is left out
missing_event_time    quarantine  missing_event_time     the event-time field is left out or null
absurd_event_time     quarantine  absurd_event_time      0, negative, a day+ in the future, or older
                                                         than max_age
oversize              quarantine  oversize               padded past the catalog's max_payload_bytes
invalid_utf8          quarantine  invalid_utf8           a string with an invalid UTF-8 sequence
empty_payload         quarantine  empty_payload          zero bytes
===================== =========== ====================== ==========================================

Late events (label ``late``) are valid events whose event time is hours behind their publish time:
the job keeps them in the late table and leaves them out of wide rows.
"""

from __future__ import annotations

import random
from typing import Any

import orjson

from widehouse.catalog.model import Topic
from widehouse.contracts.periods import DAY_MS

LABEL_PROPERTY = "wh_label"
OK = "ok"
LATE = "late"
UNKNOWN_FIELDS = "unknown_fields"
BAD_CLASSES: tuple[str, ...] = (
    "malformed_json",
    "wrong_type",
    "missing_key",
    "missing_event_time",
    "absurd_event_time",
    "oversize",
    UNKNOWN_FIELDS,
    "invalid_utf8",
    "empty_payload",
)
LABELS: tuple[str, ...] = (OK, LATE, *BAD_CLASSES)
# what the streaming job must do with each label: "accept" (wide rows), "late" (late table), "quarantine"
POLICY: dict[str, str] = {
    OK: "accept",
    LATE: "late",
    UNKNOWN_FIELDS: "accept",
    **{label: "quarantine" for label in BAD_CLASSES if label != UNKNOWN_FIELDS},
}
# the rejection reason of parse_event for each quarantined label
REASONS: dict[str, str] = {label: label for label, policy in POLICY.items() if policy == "quarantine"}

_WRONG_VALUES: dict[str, Any] = {
    "long": "1234x",
    "int": "12x",
    "timestamp-ms": "2026-01-01T00:00:00Z",
    "double": "3.14x",
    "string": 12345,
    "boolean": "yes",
    "array": {"not": "an array"},
    "map": [1, 2, 3],
    "object": "not an object",
}


def _document(topic: Topic, key: Any, event_ms: int | None, values: dict[str, Any]) -> dict[str, Any]:
    document: dict[str, Any] = {topic.key: key}
    if event_ms is not None:
        document[topic.event_time] = event_ms
    document.update(values)
    return document


def unknown_fields(topic: Topic, rng: random.Random) -> dict[str, Any]:
    """Extra fields whose names the topic does not declare."""
    declared = {f.name for f in topic.fields}
    extra: dict[str, Any] = {
        "x_client_build": f"7.{rng.randrange(10)}.{rng.randrange(100)}-rc",
        "x_ab": {"exp": rng.randrange(100), "arm": rng.choice("abc")},
        "x_trace": [rng.randrange(1 << 30) for _ in range(rng.randint(0, 3))],
    }
    return {name if name not in declared else f"{name}_extra": value for name, value in extra.items()}


def make_bad(  # noqa: PLR0911 - one return per class
    label: str,
    topic: Topic,
    rng: random.Random,
    *,
    key: Any,
    planned_ms: int,
    event_ms: int,
    values: dict[str, Any],
    good_payload: bytes,
    max_payload_bytes: int,
    max_age_ms: int,
) -> bytes:
    """The payload of one bad message of class ``label`` (not unknown_fields, which is built as good)."""
    if label == "empty_payload":
        return b""
    if label == "malformed_json":
        how = rng.randrange(3)
        if how == 0:
            return good_payload[:-1]
        if how == 1:
            return good_payload.replace(b'":', b'"=', 1)
        return good_payload + b"}"
    if label == "invalid_utf8":
        return good_payload[:-1] + b',"x_note":"caf\xc3\x28 \xff"}'
    if label == "missing_key":
        document = _document(topic, key, event_ms, values)
        del document[topic.key]
        return orjson.dumps(document)
    if label == "missing_event_time":
        document = _document(topic, key, event_ms, values)
        if rng.random() < 0.5:
            del document[topic.event_time]
        else:
            document[topic.event_time] = None
        return orjson.dumps(document)
    if label == "absurd_event_time":
        choices = [
            0,
            -rng.randint(1, 10**12),
            planned_ms + DAY_MS + rng.randint(0, 30 * DAY_MS),
            planned_ms - max_age_ms - DAY_MS - rng.randint(0, 300 * DAY_MS),
        ]
        return orjson.dumps(_document(topic, key, rng.choice(choices), values))
    if label == "wrong_type":
        candidates = [f for f in topic.fields if f.name not in (topic.key, topic.event_time)]
        target = rng.choice(candidates) if candidates else topic.field(topic.event_time)
        document = _document(topic, key, event_ms, values)
        document[target.name] = _WRONG_VALUES[target.type.kind]
        return orjson.dumps(document)
    if label == "oversize":
        document = _document(topic, key, event_ms, values)
        base = len(orjson.dumps(document))
        document["x_padding"] = "a" * max(1, max_payload_bytes - base + rng.randint(16, 1024))
        return orjson.dumps(document)
    raise ValueError(f"unknown bad-input class {label!r}")

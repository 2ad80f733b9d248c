"""Parse: what the streaming job accepts, rejects (and why), and calls late.

:func:`parse_event` is the contract in executable form; the streaming transform calls it for every
message and the generator's manifest uses the same rules, so tests check it against the hand-written
fixture in ``tests/golden/``, not against itself.

A payload is checked in this order, and the first failure is the rejection reason:

==================== ==============================================================================
reason               when
==================== ==============================================================================
empty_payload        zero bytes
oversize             more bytes than the catalog's ``max_payload_bytes``
invalid_utf8         not valid UTF-8
malformed_json       not parseable JSON
not_an_object        JSON, but not an object at the top level
missing_key          the key field is absent or null
missing_event_time   the event-time field is absent or null
wrong_type           a declared field holds a value of another type (the first such field, in
                     declaration order, depth first), e.g. a string in a long field, a float in an
                     int field, an int32 field out of range
absurd_event_time    event time <= 0, more than max_future ahead of or max_age behind publish time
==================== ==============================================================================

An accepted, on-time event can still be quarantined when it is folded, with reason ``overflow``
(:data:`OVERFLOW`): adding its value to a ``sum`` column would leave the column's type (a ``long``
sum outside int64, a ``double`` sum not finite); see :func:`widehouse.catalog.semantics.fold.overflow`.
:data:`QUARANTINE_REASONS` lists every reason a message of a known topic can be quarantined with,
including ``internal`` (:data:`INTERNAL`): handling the message raised (a bug, or a value nobody
foresaw); the stream quarantines it and goes on. Values named in a ``detail`` are rendered bounded in
depth and length (:mod:`widehouse.catalog.semantics.render`), so the message itself cannot fail.

Accepted: fields may be null or absent (except key and event time); **unknown extra fields are
accepted and ignored** (producers may add fields before the catalog knows them). ``double`` fields
accept integers. An accepted event is *late* when its event time is more than ``lateness`` behind
its publish time (see :mod:`widehouse.catalog.eventtime`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import orjson

from widehouse.catalog.eventtime import DEFAULT_RULES, EventTimeRules, classify_event_time
from widehouse.catalog.model import DEFAULT_MAX_PAYLOAD_BYTES, Topic
from widehouse.catalog.semantics.render import render_value
from widehouse.catalog.types import INT32, INT64, Field, FieldType

REJECTION_REASONS: tuple[str, ...] = (
    "empty_payload",
    "oversize",
    "invalid_utf8",
    "malformed_json",
    "not_an_object",
    "missing_key",
    "missing_event_time",
    "wrong_type",
    "absurd_event_time",
)
OVERFLOW = "overflow"
"""Quarantine reason of an accepted event whose value would overflow a sum (decided when folding)."""
INTERNAL = "internal"
"""Quarantine reason of a message whose handling raised (the transform's per-event error boundary:
whatever one message raises is its reason, detail ``ExceptionClass: message``, never the batch's)."""
QUARANTINE_REASONS: tuple[str, ...] = (*REJECTION_REASONS, OVERFLOW, INTERNAL)


@dataclass(frozen=True)
class Accepted:
    """A valid event: typed values of the declared fields (unknown fields dropped, absent -> None)."""

    row: dict[str, Any]
    key: int | str
    event_ms: int
    late: bool


@dataclass(frozen=True)
class Rejected:
    """A message for quarantine: ``reason`` (one of :data:`QUARANTINE_REASONS`) and a ``detail``."""

    reason: str
    detail: str


def parse_event(  # noqa: PLR0911 - one return per rejection reason, in contract order
    topic: Topic,
    payload: bytes,
    publish_ms: int,
    rules: EventTimeRules = DEFAULT_RULES,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
) -> Accepted | Rejected:
    """Validate one message of ``topic`` against its schema and the event-time rules."""
    if not payload:
        return Rejected("empty_payload", "the payload is empty")
    if len(payload) > max_payload_bytes:
        return Rejected("oversize", f"{len(payload)} bytes > max_payload_bytes {max_payload_bytes}")
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Rejected("invalid_utf8", f"invalid UTF-8 at byte {exc.start}")
    try:
        document = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        return Rejected("malformed_json", str(exc))
    if not isinstance(document, dict):
        return Rejected("not_an_object", f"top-level JSON is {type(document).__name__}, not an object")
    if document.get(topic.key) is None:
        return Rejected("missing_key", f"key field {topic.key!r} is missing or null")
    if document.get(topic.event_time) is None:
        return Rejected("missing_event_time", f"event-time field {topic.event_time!r} is missing or null")
    problem: list[str] = []
    row = _object(topic.fields, document, "", problem)
    if problem:
        return Rejected("wrong_type", problem[0])
    event_ms = row[topic.event_time]
    verdict = classify_event_time(event_ms, publish_ms, rules)
    if verdict == "bad":
        return Rejected("absurd_event_time", f"event time {event_ms} vs publish time {publish_ms}")
    return Accepted(row, row[topic.key], event_ms, verdict == "late")


INTEGER_RANGES: dict[str, tuple[int, int]] = {"long": INT64, "timestamp-ms": INT64, "int": INT32}
"""The inclusive range of each integer kind (what :func:`parse_event` accepts in such a field)."""
_PLANS: dict[int, tuple[tuple[Field, ...], list[tuple[str, str, tuple[int, int] | None, Field]]]] = {}


def _plan(fields: tuple[Field, ...]) -> list[tuple[str, str, tuple[int, int] | None, Field]]:
    """(name, kind, integer range, field) per field, computed once per fields tuple."""
    cached = _PLANS.get(id(fields))
    if cached is None or cached[0] is not fields:
        plan = [(f.name, f.type.kind, INTEGER_RANGES.get(f.type.kind), f) for f in fields]
        cached = _PLANS[id(fields)] = (fields, plan)
    return cached[1]


def _object(
    fields: tuple[Field, ...], document: dict[str, Any], prefix: str, problem: list[str]
) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for name, kind, bounds, field in _plan(fields):
        value = document.get(name)
        # fast paths accept exactly the values _value accepts unchanged; anything else goes through it
        if value is None:
            pass
        elif bounds is not None:
            if type(value) is not int or not bounds[0] <= value <= bounds[1]:
                value = _value(field.type, value, prefix + name, problem)
        elif kind == "string":
            if type(value) is not str:
                value = _value(field.type, value, prefix + name, problem)
        elif kind == "double":
            if type(value) is not float or not math.isfinite(value):
                value = _value(field.type, value, prefix + name, problem)
        else:
            value = _value(field.type, value, prefix + name, problem)
        if problem:
            return row
        row[name] = value
    return row


def _value(kind: FieldType, value: Any, where: str, problem: list[str]) -> Any:  # noqa: PLR0911, PLR0912
    if value is None:
        return None
    name = kind.kind
    if name in ("long", "timestamp-ms", "int"):
        low, high = INT32 if name == "int" else INT64
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            problem.append(f"{where}: {_short(value)} is not a {name}")
            return None
        return value
    if name == "double":
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            problem.append(f"{where}: {_short(value)} is not a double")
            return None
        return float(value)
    if name == "string":
        if not isinstance(value, str):
            problem.append(f"{where}: {_short(value)} is not a string")
            return None
        return value
    if name == "boolean":
        if not isinstance(value, bool):
            problem.append(f"{where}: {_short(value)} is not a boolean")
            return None
        return value
    if name == "array":
        assert kind.element is not None
        if not isinstance(value, list):
            problem.append(f"{where}: {_short(value)} is not an array")
            return None
        items = []
        for index, item in enumerate(value):
            items.append(_value(kind.element, item, f"{where}[{index}]", problem))
            if problem:
                return None
        return items
    if name == "map":
        assert kind.element is not None
        if not isinstance(value, dict):
            problem.append(f"{where}: {_short(value)} is not an object (map)")
            return None
        entries = {}
        for key, item in value.items():
            entries[key] = _value(kind.element, item, f"{where}[{_short(key)}]", problem)
            if problem:
                return None
        return entries
    # object
    if not isinstance(value, dict):
        problem.append(f"{where}: {_short(value)} is not an object")
        return None
    return _object(kind.fields, value, where + ".", problem)


def check_value(kind: FieldType, value: Any, where: str, problem: list[str]) -> Any:
    """``value`` checked (and converted) as a value of ``kind``: None with the first problem appended
    to ``problem`` if it is not one (the check :func:`parse_event` applies to every declared field)."""
    return _value(kind, value, where, problem)


def _short(value: Any) -> str:
    """The value in an error message: bounded in depth and length, whatever the producer sent."""
    return render_value(value)

"""Parser fuzz (issue 16, fault suite): hostile payloads through the stream's transform and merge.

Hypothesis generates batches of messages for the catalog's topics (and one unknown topic): random
bytes, random JSON documents, events of the topic's shape with extreme values (2^62, 2^64, -2^63-1,
1.7e308, NaN and Infinity tokens, huge strings, lone surrogates, invalid UTF-8, deep nesting, wrong
types), and event times on time, late, absurd or missing. Each batch runs as the job runs it: the
transform per input partition (two partitions), then the driver's settle / partials / side / stats.

What must hold, whatever the input: no exception escapes; every message ends in exactly one of
valid, quarantined (with a known reason) or late; per topic, rows in = good + bad + late, and the
side tables hold exactly the bad and late messages. The properties are structural (no expected
value comes from the code under test). Runs in the unit suite in a few seconds.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from widehouse.catalog import QUARANTINE_REASONS, Catalog, load_catalog
from widehouse.catalog.semantics.parse import INTERNAL
from widehouse.stream import merge
from widehouse.stream.output import output_schema
from widehouse.stream.plan import KIND_LATE, KIND_QUARANTINE, TransformPlan
from widehouse.stream.transform import transform

ROOT = Path(__file__).parents[3]
CATALOG = load_catalog(ROOT / "schemas")
PLAN = TransformPlan.for_topics(CATALOG, [str(t.name) for t in CATALOG.topics])
REFERENCE = replace(PLAN, fast_path=False)  # every event through the reference parse and fold
UNKNOWN = "persistent://bigolive/app/not_in_the_catalog"
TOPICS = [str(t.name) for t in CATALOG.topics]
NOW = 1_790_000_000_000  # publish times around 2026-09
MINUTE, HOUR, DAY = 60_000, 3_600_000, 86_400_000
REASONS = (set(QUARANTINE_REASONS) - {INTERNAL}) | {"unknown_topic"}  # internal: a bug, never expected

EXTREMES: list[Any] = [
    2**62,
    2**63 - 1,
    2**63,
    -(2**63),
    -(2**63) - 1,
    2**64,
    10**40,
    1.7e308,
    -1.7e308,
    5e-324,
    -0.0,
    math.nan,
    math.inf,
    -math.inf,
    True,
    False,
    None,
    "",
    "x" * 70_000,
    "\ud800",
    "\udfff\ud83d",
    "é\u0000\u2028",
    [],
    {},
    [1, [2, [3]]],
    {"a": {"b": {"c": None}}},
]


def _nested(depth: int, kind: str) -> str:
    if kind == "list":
        return "[" * depth + "]" * depth
    return '{"a":' * depth + "1" + "}" * depth


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(st.characters(codec=None, exclude_categories=()), max_size=20)
    | st.sampled_from(EXTREMES),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=12,
)


def _encode(document: Any, ascii_only: bool) -> bytes:
    """JSON text as a careless producer writes it: NaN / Infinity tokens, surrogates as raw bytes."""
    return json.dumps(document, allow_nan=True, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")


@st.composite
def event_payload(draw: st.DrawFn, topic: str, publish_ms: int) -> bytes:
    """A document of the topic's shape; each field plausible, extreme, or missing."""
    described = CATALOG.topic(topic)
    document: dict[str, Any] = {}
    dirty = draw(st.booleans())  # else every field is plausible (a valid, late or absurd event)
    for field in described.fields:
        choice = draw(st.sampled_from(["plausible"] * 7 + ["extreme", "missing", "random"])) if dirty else "x"
        if choice == "missing":
            continue
        if choice == "extreme":
            document[field.name] = draw(st.sampled_from(EXTREMES))
        elif choice == "random":
            document[field.name] = draw(json_values)
        elif field.type.kind in ("long", "int"):
            document[field.name] = draw(st.integers(min_value=-5, max_value=10**6))
        elif field.type.kind == "double":
            document[field.name] = draw(st.floats(allow_nan=False, allow_infinity=False, width=64))
        elif field.type.kind == "boolean":
            document[field.name] = draw(st.booleans())
        elif field.type.kind == "string":
            document[field.name] = draw(st.text(max_size=8))
        else:
            document[field.name] = None
    event_offset = draw(
        st.sampled_from([-2 * MINUTE, -HOUR, -HOUR - 1, -5 * HOUR, -8 * DAY, 5 * MINUTE, 5 * MINUTE + 1, DAY])
    )
    time_value = draw(st.sampled_from(["offset", "offset", "offset", "extreme", "missing"]))
    if time_value == "offset":
        document[described.event_time] = publish_ms + event_offset
    elif time_value == "extreme":
        document[described.event_time] = draw(st.sampled_from(EXTREMES))
    else:
        document.pop(described.event_time, None)
    return _encode(document, draw(st.booleans()))


# --- hostile fields: the whole space of JSON orjson accepts, inside an otherwise valid event ------
ORJSON_MAX_DEPTH = 1024  # orjson's nesting limit (the event's own object is level 1)
SCALAR_FRAGMENTS: list[bytes] = [
    b"null",
    b"true",
    b"false",
    b"0",
    b"-1",
    b"2147483648",  # int32 + 1
    b"9223372036854775807",
    b"9223372036854775808",  # int64 + 1 (orjson: an int up to 2**64 - 1)
    b"-9223372036854775809",
    b"18446744073709551616",  # 2**64 (orjson: a float)
    str(2**70).encode(),
    str(-(2**70)).encode(),
    b"1" + b"0" * 400,  # beyond a double: orjson refuses it
    b"1.5",
    b"-0.0",
    b"5e-324",
    b"1.7976931348623157e308",
    b"1e400",
    b"NaN",
    b"Infinity",
    b"-Infinity",
    b'""',
    b'"success"',
    b'"\\ud800"',  # a lone surrogate, escaped
    b'"\\udfff\\ud83d"',
    b'"\\u0000\\u2028"',
    b'"\xed\xa0\x80"',  # a lone surrogate as raw (invalid) UTF-8
    b'"\xff\xfe"',  # raw bytes that are not UTF-8
    b"[]",
    b"{}",
]


def _orjson_accepts(text: bytes) -> bool:
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    return True


ACCEPTED_SCALARS = [f for f in SCALAR_FRAGMENTS if _orjson_accepts(f)]
"""What can sit deep inside a document orjson still accepts (so the parser, not orjson, judges it)."""


@st.composite
def hostile_fragment(draw: st.DrawFn) -> bytes:
    """One JSON value (or near-JSON text) of any type and size orjson may accept or refuse."""
    kind = draw(st.sampled_from(["scalar", "scalar", "deep", "string", "array", "object"]))
    if kind == "scalar":
        return draw(st.sampled_from(SCALAR_FRAGMENTS))
    if kind == "deep":  # up to orjson's limit counting the event's object, and one past it
        depth = draw(
            st.sampled_from([2, 100, 1000, ORJSON_MAX_DEPTH - 2, ORJSON_MAX_DEPTH - 1, ORJSON_MAX_DEPTH])
        )
        inner = draw(st.sampled_from(ACCEPTED_SCALARS))
        if draw(st.booleans()):
            return b"[" * depth + inner + b"]" * depth
        return b'{"diamonds":' * depth + inner + b"}" * depth
    if kind == "string":  # under and over max_payload_bytes (65,536)
        return b'"' + b"x" * draw(st.sampled_from([1000, 60_000, 70_000])) + b'"'
    element = draw(st.sampled_from([*ACCEPTED_SCALARS, b"NaN"]))
    count = draw(st.sampled_from([0, 1, 1000, 12_000]))
    if kind == "array":
        return b"[" + b",".join([element] * count) + b"]"
    return b"{" + b",".join(b'"k%d":%s' % (i, element) for i in range(count)) + b"}"


def _plausible(field: Any, publish_ms: int) -> bytes:  # noqa: PLR0911 - one return per kind
    """A value the field accepts (filters' values included: status 'success' feeds the sums)."""
    kind = field.type.kind
    if field.gen.values and field.type.is_scalar:
        return json.dumps(field.gen.values[0]).encode()
    if kind == "timestamp-ms":
        return str(publish_ms - MINUTE).encode()
    if kind in ("long", "int"):
        return b"7"
    if kind == "double":
        return b"4.99"
    if kind == "boolean":
        return b"true"
    if kind == "string":
        return b'"s"'
    if kind == "object":
        return (
            b"{"
            + b",".join(b'"%s":%s' % (f.name.encode(), _plausible(f, publish_ms)) for f in field.type.fields)
            + b"}"
        )
    return b"[]" if kind == "array" else b"{}"


@st.composite
def hostile_payload(draw: st.DrawFn, topic: str, publish_ms: int) -> bytes:
    """An event of the topic with plausible values, one or more fields (or fields of its objects)
    replaced by a hostile fragment, some written twice (duplicate keys: orjson keeps the last)."""
    described = CATALOG.topic(topic)
    members: list[bytes] = []
    targets = draw(st.sets(st.sampled_from([f.name for f in described.fields]), min_size=1, max_size=3))
    for field in described.fields:
        name = json.dumps(field.name).encode()
        value = _plausible(field, publish_ms)
        if field.name in targets:
            hostile = draw(hostile_fragment())
            if field.type.kind == "object" and field.type.fields and draw(st.booleans()):
                inner = draw(st.sampled_from(field.type.fields))  # a path a sum reads, e.g. gift.diamonds
                hostile = b'{"%s":%s}' % (inner.name.encode(), hostile)
            duplicate = draw(st.sampled_from(["no", "no", "hostile_last", "hostile_first"]))
            if duplicate == "hostile_last":
                members.append(name + b":" + value)
            members.append(name + b":" + hostile)
            if duplicate == "hostile_first":
                members.append(name + b":" + value)
        else:
            members.append(name + b":" + value)
    return b"{" + b",".join(members) + b"}"


@st.composite
def message(draw: st.DrawFn) -> tuple[str, bytes | None, int]:
    topic = UNKNOWN if draw(st.integers(0, 9)) == 0 else draw(st.sampled_from(TOPICS))
    publish_ms = NOW + draw(st.integers(min_value=-DAY, max_value=DAY))
    shape = draw(
        st.sampled_from(
            ["event", "event", "event", "hostile", "hostile", "bytes", "json", "nested", "huge", "none"]
        )
    )
    if shape == "none":  # a message without a value
        payload = None
    elif shape == "event" and topic != UNKNOWN:
        payload = draw(event_payload(topic, publish_ms))
    elif shape == "bytes":
        payload = draw(st.binary(max_size=64))
    elif shape == "nested":
        depth = draw(st.sampled_from([2, 127, 128, 129, 1024, 5000]))
        payload = _nested(depth, draw(st.sampled_from(["list", "object"]))).encode()
    elif shape == "hostile" and topic != UNKNOWN:
        payload = draw(hostile_payload(topic, publish_ms))
    elif shape == "huge":
        payload = b'{"uid": 1, "ts": 0, "padding": "' + b"x" * draw(st.sampled_from([65_500, 70_000])) + b'"}'
    else:
        payload = _encode(draw(json_values), draw(st.booleans()))
    return topic, payload, publish_ms


def _batch(messages: list[tuple[str, bytes | None, int]], first: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "value": pa.array([p for _, p, _ in messages], pa.binary()),
            "__topic": pa.array([t for t, _, _ in messages], pa.string()),
            "__messageId": pa.array([f"{first + i}:0:-1:-1" for i in range(len(messages))], pa.string()),
            "__publishTime": pa.array([ms * 1000 for _, _, ms in messages], pa.timestamp("us", tz="UTC")),
        }
    )


PRODUCTION_RECURSION_LIMIT = 1000
"""CPython's default, what a Spark Python worker runs the transform with. Hypothesis raises the limit
by ~2,000 frames while a test runs, which hid ``repr`` failing on a list nested 1,000 levels deep."""


@contextmanager
def production_recursion_limit() -> Iterator[None]:
    saved = sys.getrecursionlimit()
    sys.setrecursionlimit(PRODUCTION_RECURSION_LIMIT)
    try:
        yield
    finally:
        sys.setrecursionlimit(saved)


def transformed(messages: list[tuple[str, bytes | None, int]], split: int, plan: TransformPlan) -> pa.Table:
    """The transform's tagged output over two input partitions (under the production recursion limit)."""
    parts = [messages[:split], messages[split:]]
    outputs = []
    first = 0
    with production_recursion_limit():
        for part in parts:
            outputs += list(transform(iter([_batch(part, first)]), plan))
            first += len(part)
    return pa.Table.from_batches(outputs, schema=output_schema(plan))


def canonical(out: pa.Table) -> list[str]:
    """Every output row, canonical and sorted (order within kinds may differ between the paths)."""
    return sorted(json.dumps(r, sort_keys=True, default=repr) for r in out.to_pylist())


def run_batch(messages: list[tuple[str, bytes | None, int]], split: int) -> dict[str, Any]:
    """The transform over two input partitions, then the driver's side of a batch (as batch.py);
    the reference path must have produced exactly the same rows."""
    out = transformed(messages, split, PLAN)
    assert canonical(out) == canonical(transformed(messages, split, REFERENCE)), "fast and reference differ"
    out = merge.settle(out, PLAN)
    return {
        "partials": {name: merge.partials(out, PLAN, name) for name in PLAN.tables},
        "quarantine": merge.side(out, KIND_QUARANTINE, "app", "g", 0).to_pylist(),
        "late": merge.side(out, KIND_LATE, "app", "g", 0).to_pylist(),
        "stats": merge.topic_stats(out),
    }


@pytest.mark.timeout(120)
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(messages=st.lists(message(), min_size=1, max_size=12), cut=st.floats(min_value=0, max_value=1))
def test_every_message_ends_valid_quarantined_or_late_and_nothing_escapes(
    messages: list[tuple[str, bytes | None, int]], cut: float
) -> None:
    result = run_batch(messages, round(cut * len(messages)))
    stats = result["stats"]

    sent: dict[str, int] = {}
    for topic, _, _ in messages:
        sent[topic] = sent.get(topic, 0) + 1
    assert {t: s.rows_in for t, s in stats.items()} == sent
    for topic, s in stats.items():
        assert s.good + s.bad + s.late == s.rows_in, topic

    event_ids = {f"{i}:0:-1:-1" for i in range(len(messages))}
    # a quarantine row is a message, or a partial sum the merge left out (overflow, no message of its own)
    quarantined = [r for r in result["quarantine"] if r["message_id"] in event_ids]
    merged_out = [r for r in result["quarantine"] if r["message_id"] not in event_ids]
    assert all(r["reason"] == "overflow" and r["message_id"].startswith("merge:") for r in merged_out)
    assert all(r["reason"] in REASONS for r in quarantined), [r["reason"] for r in quarantined]
    late = result["late"]
    assert all(r["message_id"] in event_ids for r in late)
    side_ids = [r["message_id"] for r in quarantined] + [r["message_id"] for r in late]
    assert len(side_ids) == len(set(side_ids)), "a message is in two side rows"
    assert len(quarantined) == sum(s.bad for s in stats.values())
    assert len(late) == sum(s.late for s in stats.values())
    for name, rows in result["partials"].items():
        assert rows.num_rows >= 0, name


@st.composite
def hostile_between_valid(draw: st.DrawFn) -> tuple[list[tuple[str, bytes | None, int]], set[int]]:
    """Hostile events of random topics, each followed by a plausible (valid, on-time) event; the
    second item is the indexes of the valid ones."""
    messages: list[tuple[str, bytes | None, int]] = []
    valid: set[int] = set()
    for _ in range(draw(st.integers(min_value=1, max_value=6))):
        topic = draw(st.sampled_from(TOPICS))
        publish_ms = NOW + draw(st.integers(min_value=-HOUR, max_value=HOUR))
        messages.append((topic, draw(hostile_payload(topic, publish_ms)), publish_ms))
        fields = CATALOG.topic(topic).fields
        plain = (
            b"{" + b",".join(b'"%s":%s' % (f.name.encode(), _plausible(f, publish_ms)) for f in fields) + b"}"
        )
        valid.add(len(messages))
        messages.append((topic, plain, publish_ms))
    return messages, valid


@pytest.mark.timeout(120)
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(bag=hostile_between_valid(), cut=st.floats(min_value=0, max_value=1))
def test_hostile_fields_are_judged_by_the_parser_and_valid_neighbours_land(
    bag: tuple[list[tuple[str, bytes | None, int]], set[int]], cut: float
) -> None:
    """Deep nesting up to orjson's limit, huge strings and arrays, every scalar in every field,
    duplicate keys, NaN / Infinity, lone surrogates, numbers past 64 bits, raw bytes: nothing escapes,
    both paths agree (run_batch), every message is counted once, no hostile value is an ``internal``
    error (the parser names what is wrong with it), and every valid neighbour is folded."""
    messages, valid = bag
    result = run_batch(messages, round(cut * len(messages)))
    stats = result["stats"]
    assert sum(s.rows_in for s in stats.values()) == len(messages)
    for topic, s in stats.items():
        assert s.good + s.bad + s.late == s.rows_in, topic
    assert sum(s.good for s in stats.values()) >= len(valid)
    side = [r for r in result["quarantine"] if not r["message_id"].startswith("merge:")] + result["late"]
    side_ids = [int(r["message_id"].split(":")[0]) for r in side]
    assert len(side_ids) == len(set(side_ids)), "a message is in two side rows"
    assert not set(side_ids) & valid, "a valid event was not folded"
    reasons = {r["reason"] for r in result["quarantine"]}
    assert reasons <= REASONS, reasons


def test_the_fuzz_strategies_reach_every_verdict() -> None:
    """Hand-written messages of the kinds the fuzz draws, each with its verdict written by hand."""
    login = "persistent://bigolive/app/login"
    on_time = {"uid": 1, "ts": NOW - MINUTE, "result": "success"}
    messages = [
        (login, json.dumps(on_time).encode(), NOW),  # valid
        (login, json.dumps({**on_time, "ts": NOW - 5 * HOUR}).encode(), NOW),  # late
        (login, b"\xff\xfe", NOW),  # invalid_utf8
        (login, json.dumps({**on_time, "uid": 2**64}).encode(), NOW),  # wrong_type
        (login, json.dumps({**on_time, "latency_ms": math.nan}).encode(), NOW),  # NaN token
        (login, _nested(5000, "list").encode(), NOW),  # malformed_json (too deep)
        (UNKNOWN, b"{}", NOW),  # unknown_topic
        (login, None, NOW),  # empty_payload
    ]
    result = run_batch(messages, 3)
    s = result["stats"][login]
    assert (s.rows_in, s.good, s.late, s.bad) == (7, 1, 1, 5)
    reasons = sorted(r["reason"] for r in result["quarantine"])
    assert reasons == [
        "empty_payload",
        "invalid_utf8",
        "malformed_json",
        "malformed_json",
        "unknown_topic",
        "wrong_type",
    ]


def test_catalog_is_the_demo_catalog() -> None:
    assert isinstance(CATALOG, Catalog) and len(TOPICS) >= 40

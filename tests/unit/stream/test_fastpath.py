"""The transform's compiled fast path (widehouse.stream.fastpath) against the reference path.

The fast path must change nothing but the speed: the transform with it and without it (every event
through the catalog's reference parse and fold, ``TransformPlan(fast_path=False)``) must emit the
same rows, on generated traffic with every kind of bad message and on hypothesis' hostile
payloads. The handlers' own verdicts are checked on hand-written events. (The golden tests check
the transform itself against the hand-written fixture.)
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from widehouse.catalog import load_catalog
from widehouse.catalog.filters import parse_filter
from widehouse.catalog.semantics.fold import WideRows
from widehouse.contracts.periods import HOUR_MS
from widehouse.generator.core import TrafficGenerator
from widehouse.generator.options import GenerateOptions
from widehouse.stream import fastpath
from widehouse.stream.output import output_schema
from widehouse.stream.plan import TransformPlan
from widehouse.stream.transform import transform

ROOT = Path(__file__).parents[3]
CATALOG = load_catalog(ROOT / "schemas")
TOPICS = [str(t.name) for t in CATALOG.topics]
FAST = TransformPlan.for_topics(CATALOG, TOPICS)
REFERENCE = replace(FAST, fast_path=False)
LOGIN = "persistent://bigolive/app/login"
NOW = 1_790_000_000_000


def rows(plan: TransformPlan, batches: list[pa.RecordBatch]) -> list[str]:
    """Every output row of one transform call, canonical and sorted (order within kinds may differ)."""
    out = pa.Table.from_batches(list(transform(iter(batches), plan)), schema=output_schema(plan))
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in out.to_pylist())


def source_batch(messages: list[tuple[str, bytes | None, int]]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "value": pa.array([p for _, p, _ in messages], pa.binary()),
            "__topic": pa.array([t for t, _, _ in messages], pa.string()),
            "__messageId": pa.array([f"{i}:0:-1:-1" for i in range(len(messages))], pa.string()),
            "__publishTime": pa.array([ms * 1000 for _, _, ms in messages], pa.timestamp("us", tz="UTC")),
        }
    )


@pytest.fixture(scope="module")
def generated() -> list[pa.RecordBatch]:
    """20k generated messages (1% bad of every class, 0.5% late) as the source's batches."""
    base = (int(time.time() * 1000) // HOUR_MS - 3) * HOUR_MS
    generator = TrafficGenerator(
        CATALOG,
        GenerateOptions(count=20_000, rate=0, base_time_ms=base, bad_rate=0.01, late_rate=0.005, users=300),
    )
    messages = []
    for chunk in generator.chunks():
        for t, payload, offset in zip(chunk.topics, chunk.payloads, chunk.offsets_ms, strict=True):
            messages.append((str(CATALOG.topics[t].name), payload, base + offset + 1_500))
    whole = source_batch(messages)
    return [whole.slice(i, 4096) for i in range(0, whole.num_rows, 4096)]


def test_generated_traffic_gives_the_same_rows_with_and_without_the_fast_path(
    generated: list[pa.RecordBatch],
) -> None:
    fast, reference = rows(FAST, generated), rows(REFERENCE, generated)
    assert len(fast) > 500
    assert fast == reference


def test_every_demo_topic_gets_a_handler() -> None:
    """Otherwise the fast path would silently be the reference path for that topic."""
    missing = []
    for topic in CATALOG.topics:
        tables = [WideRows(CATALOG.table(name)) for name in topic.tables]
        if fastpath.compile_handler(topic, tables, CATALOG.rules, CATALOG.max_payload_bytes) is None:
            missing.append(str(topic.name))
    assert missing == []


def _login_handler() -> tuple[fastpath.Handler, WideRows]:
    topic = CATALOG.topic(LOGIN)
    tables = [WideRows(CATALOG.table(name)) for name in topic.tables]
    for t in tables:
        t.period_ms = HOUR_MS
    handler = fastpath.compile_handler(topic, tables, CATALOG.rules, CATALOG.max_payload_bytes)
    assert handler is not None
    return handler, tables[0]


def test_handlers_share_compiled_code_but_fold_into_their_own_tables() -> None:
    """Compiling is cached per process (every task builds handlers); the state stays per task."""
    (first, first_rows), (second, second_rows) = _login_handler(), _login_handler()
    assert first.__code__ is second.__code__ and first is not second
    event = json.dumps({"uid": 1, "ts": NOW - 60_000, "result": "success"}).encode()
    assert first(event, NOW) == NOW - 60_000
    assert len(first_rows.rows) == 1 and second_rows.rows == {}


def test_topics_of_one_shape_compile_once_and_each_handler_names_its_topic(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Many event kinds share their fields and rules: their handlers' source is the same, compiled
    once per process; each topic's code still carries its own name (tracebacks, profiles)."""
    from widehouse.pulsar.topics import TopicName

    login = CATALOG.topic(LOGIN)
    twin = replace(login, name=TopicName.parse(LOGIN + "_twin"))
    compiled: list[str] = []
    real = compile

    def counting(source: str, filename: str, mode: str) -> Any:
        compiled.append(filename)
        return real(source, filename, mode)

    monkeypatch.setattr(fastpath, "_CODE", {})
    monkeypatch.setattr(fastpath, "compile", counting, raising=False)  # the module's, not builtins'

    handlers = []
    for topic in (login, twin, login):
        tables = [WideRows(CATALOG.table(name)) for name in topic.tables]
        handler = fastpath.compile_handler(topic, tables, CATALOG.rules, CATALOG.max_payload_bytes)
        assert handler is not None
        handlers.append((handler, tables[0]))
    assert compiled == [f"<widehouse fast path: {LOGIN}>"]
    names = [h.__code__.co_filename for h, _ in handlers]
    assert names == [f"<widehouse fast path: {t}>" for t in (LOGIN, LOGIN + "_twin", LOGIN)]
    event = json.dumps({"uid": 1, "ts": NOW - 60_000, "result": "success"}).encode()
    assert handlers[1][0](event, NOW) == NOW - 60_000
    assert len(handlers[1][1].rows) == 1 and handlers[0][1].rows == {}


@pytest.mark.parametrize(
    ("change", "taken"),
    [
        ({}, True),
        ({"ts": NOW - 5 * HOUR_MS}, False),  # late: the reference path writes the late row
        ({"ts": NOW + HOUR_MS}, False),  # absurd
        ({"ts": 0}, False),
        ({"uid": None}, False),  # missing key
        ({"uid": 2**64}, False),  # wrong type
        ({"uid": True}, False),  # a bool is not a long
        ({"uid": 1.0}, False),
        ({"result": 7}, False),
    ],
)
def test_the_handler_takes_valid_on_time_events_and_leaves_the_rest_untouched(
    change: dict[str, Any], taken: bool
) -> None:
    handler, table = _login_handler()
    event = {"uid": 1, "ts": NOW - 60_000, "result": "success", **change}
    got = handler(json.dumps(event).encode(), NOW)
    assert (got == event["ts"]) if taken else (got is None)
    assert bool(table.rows) == taken  # a refused event changed nothing


def test_a_double_field_holding_an_integer_takes_the_reference_path() -> None:
    """The reference converts it to a float; the fast path would keep an int."""
    topic = CATALOG.topic("persistent://bigolive/commerce/purchase")
    tables = [WideRows(CATALOG.table(name)) for name in topic.tables]
    handler = fastpath.compile_handler(topic, tables, CATALOG.rules, CATALOG.max_payload_bytes)
    assert handler is not None
    event = {"uid": 1, "ts": NOW - 60_000, "amount_usd": 3, "status": "success"}
    assert handler(json.dumps(event).encode(), NOW) is None
    assert handler(json.dumps({**event, "amount_usd": 3.5}).encode(), NOW) == NOW - 60_000


@pytest.mark.parametrize(
    "text",
    [
        "result = 'success'",
        "not result = 'success'",
        "result <> 'success' or latency_ms > 100",
        "not (result = 'success' and latency_ms >= 100)",
        "result in ('success', 'fail') and not latency_ms is null",
        "result not in ('success')",
        "latency_ms is not null",
        "not (latency_ms < 5 or result is null)",
    ],
)
def test_rendered_filters_agree_with_the_reference_predicate(text: str) -> None:
    """Three-valued logic: every combination of null and non-null values, rendered vs interpreted."""
    topic = CATALOG.topic(LOGIN)
    expr = parse_filter(text, lambda path: topic.field(path).type.kind)
    reference = expr.predicate()
    env: dict[str, Any] = {"get_path": fastpath.get_path}
    rendered = fastpath._Filters(env, {"result": "r", "latency_ms": "m"}).true(expr.expr)
    check = eval(f"lambda r, m, d: {rendered}", env)
    for result in (None, "success", "fail", "other"):
        for latency in (None, 0, 5, 100, 101):
            row = {"result": result, "latency_ms": latency}
            assert check(result, latency, row) is reference(row), (text, row)


# --- hostile input: the parser fuzz's messages, through both paths --------------------------------
from tests.unit.stream.test_parser_fuzz import message, production_recursion_limit  # noqa: E402


@pytest.mark.timeout(120)
@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(messages=st.lists(message(), min_size=1, max_size=16))
def test_hostile_payloads_give_the_same_rows_with_and_without_the_fast_path(
    messages: list[tuple[str, bytes | None, int]],
) -> None:
    batch = [source_batch(messages)]
    with production_recursion_limit():  # as a Spark worker runs (hypothesis raises the limit)
        fast, reference = rows(FAST, batch), rows(REFERENCE, batch)
    assert fast == reference


def test_overflowing_sums_give_the_same_rows_with_and_without_the_fast_path() -> None:
    gift = "persistent://bigolive/live/gift_send"
    big = 2**62
    events = [{"uid": 7, "ts": NOW - 60_000 + i, "gift": {"diamonds": big}} for i in range(5)]
    events += [{"uid": 7, "ts": NOW - 50_000, "gift": {"diamonds": -(2**63)}}]
    batch = [source_batch([(gift, json.dumps(e).encode(), NOW) for e in events])]
    fast = rows(FAST, batch)
    assert fast == rows(REFERENCE, batch)
    assert sum('"overflow"' in r for r in fast) >= 2


def test_two_min_max_first_last_rules_on_one_column_take_the_reference_path() -> None:
    """The handler compares each with the stored state only (its checks run before any store), so a
    second rule on the same column would not see the first's value: no handler, as for two sums."""
    topic = CATALOG.topic("persistent://bigolive/commerce/purchase")
    (again,) = [m for m in topic.mappings if m.table == "user_hourly" and m.column == "max_recharge_usd"]
    doubled = replace(topic, mappings=(*topic.mappings, again))
    tables = [WideRows(CATALOG.table(name)) for name in topic.tables]
    assert fastpath.compile_handler(topic, tables, CATALOG.rules, CATALOG.max_payload_bytes) is not None
    assert fastpath.compile_handler(doubled, tables, CATALOG.rules, CATALOG.max_payload_bytes) is None


def _handler(topic_name: str) -> tuple[fastpath.Handler, list[WideRows]]:
    topic = CATALOG.topic(topic_name)
    tables = [WideRows(CATALOG.table(name)) for name in topic.tables]
    handler = fastpath.compile_handler(topic, tables, CATALOG.rules, CATALOG.max_payload_bytes)
    assert handler is not None
    return handler, tables


GIFT = {"id": 7, "name": "rose", "diamonds": 1314, "is_lucky": True}


@pytest.mark.parametrize(
    ("gift", "taken"),
    [
        (GIFT, True),
        (None, True),  # a null object: its fields read as null
        ({**GIFT, "wrapping": [1, 2]}, True),  # an undeclared field is not read
        ({"diamonds": 1314}, True),  # absent fields are null
        ([GIFT], False),  # not an object
        ({**GIFT, "diamonds": "1314"}, False),
        ({**GIFT, "diamonds": True}, False),  # a bool is not a long
        ({**GIFT, "diamonds": 2**63}, False),
        ({**GIFT, "id": 2**31}, False),  # an int's range
        ({**GIFT, "is_lucky": 1}, False),
        ({**GIFT, "name": None, "diamonds": 1314.0}, False),  # a double where a long is declared
    ],
)
def test_an_object_field_is_checked_inline_and_its_fields_read_as_the_reference_reads_them(
    gift: Any, taken: bool
) -> None:
    handler, (hourly, daily) = _handler("persistent://bigolive/live/gift_send")
    event = {"uid": 1, "ts": NOW - 60_000, "gift": gift}
    assert handler(json.dumps(event).encode(), NOW) == (event["ts"] if taken else None)
    if not taken:
        assert hourly.rows == {} and daily.rows == {}
        return
    (row,) = hourly.rows.values()
    (day,) = daily.rows.values()
    diamonds = gift.get("diamonds") if gift else None
    assert row[hourly.index["gifts_sent"]] == 1
    assert row[hourly.index["gift_diamonds_sent"]] == diamonds
    assert row[hourly.index["max_gift_diamonds"]] == diamonds
    assert row[hourly.index["big_gifts_sent"]] == (1 if diamonds == 1314 else 0)
    assert row[hourly.index["lucky_gifts_sent"]] == (1 if gift and gift.get("is_lucky") else 0)
    name = gift.get("name") if gift else None
    assert day[daily.index["last_gift_name"]] == (None if name is None else (NOW - 60_000, name))


@pytest.mark.parametrize(
    ("tags", "taken"),
    [
        (["new", "hot"], True),
        ([], True),
        (["new", None], True),  # a null element is a null string
        ("new", False),  # not an array
        (["new", 3], False),
        ([["new"]], False),
        ({"0": "new"}, False),
    ],
)
def test_an_array_of_scalars_is_checked_inline(tags: Any, taken: bool) -> None:
    handler, (hourly, _) = _handler("persistent://bigolive/app/page_view")
    event = {"uid": 1, "ts": NOW - 60_000, "page": "home", "dwell_ms": 500, "tags": tags}
    assert handler(json.dumps(event).encode(), NOW) == (event["ts"] if taken else None)
    assert len(hourly.rows) == (1 if taken else 0)


def test_a_checked_object_is_built_only_where_it_is_read_whole() -> None:
    """Its fields' checks always run; the dict the reference builds is built only when read."""
    handler, _ = _handler("persistent://bigolive/live/gift_send")
    assert handler.__doc__ is not None
    assert "f4_2 = f4.get('diamonds')" in handler.__doc__
    assert " = {" not in handler.__doc__  # the rules read gift.diamonds, gift.name and gift.is_lucky


def test_an_objects_dict_is_kept_when_the_rules_or_an_enclosing_kept_dict_read_it() -> None:
    lines = [
        "    f4_1_0 = f4_1.get('x')",
        "        f4_1 = {'x': f4_1_0}",  # a nested object's dict
        "        f4 = {'a': f4_0, 'b': f4_1}",
        "        f5 = {'y': f5_0}",
    ]
    unbuilt = fastpath._unread_objects_unbuilt
    assert unbuilt(lines, ["    p0 = (f4 is not None)"]) == lines[:3]  # f4 read whole: f4_1 inside it
    assert unbuilt(lines, ["    v0 = get_path(f4_1, L0)", "    return f1"]) == lines[:2]
    assert unbuilt(lines, ["    v0 = f4_1_0", "    return f5_0"]) == lines[:1]


def test_tables_of_one_period_share_the_key_and_tables_of_another_get_their_own() -> None:
    """A handler folding into an hourly and a daily table (as compiled on its own, each table at
    its grain) keys each by its own period; the transform's partials, all hourly, share one key."""
    topic = CATALOG.topic("persistent://bigolive/live/gift_send")
    event_ms = NOW - NOW % 86_400_000 + 5 * HOUR_MS + 120_000  # 05:02 of the day
    event = json.dumps({"uid": 1, "ts": event_ms, "gift": {"diamonds": 3}}).encode()
    hourly, daily = (WideRows(CATALOG.table(name)) for name in topic.tables)
    assert (hourly.period_ms, daily.period_ms) == (HOUR_MS, 86_400_000)
    handler = fastpath.compile_handler(topic, [hourly, daily], CATALOG.rules, CATALOG.max_payload_bytes)
    assert handler is not None and handler.__doc__ is not None
    assert handler(event, event_ms + 1_000) == event_ms
    assert list(hourly.rows) == [(1, event_ms - 120_000)]
    assert list(daily.rows) == [(1, event_ms - 5 * HOUR_MS - 120_000)]
    assert "k1 = k0" not in handler.__doc__
    hours = [WideRows(CATALOG.table(name)) for name in topic.tables]
    for rows_of_table in hours:
        rows_of_table.period_ms = HOUR_MS
    shared = fastpath.compile_handler(topic, hours, CATALOG.rules, CATALOG.max_payload_bytes)
    assert shared is not None and shared.__doc__ is not None and "k1 = k0" in shared.__doc__
    assert shared(event, event_ms + 1_000) == event_ms
    assert list(hours[0].rows) == list(hours[1].rows) == [(1, event_ms - 120_000)]


def test_a_double_sum_leaving_the_finite_range_overflows_as_on_the_reference_path() -> None:
    purchase = "persistent://bigolive/commerce/purchase"
    events = [
        {"uid": 9, "ts": NOW - 60_000 + i, "amount_usd": 1.7e308, "status": "success"} for i in range(3)
    ]
    events += [{"uid": 9, "ts": NOW - 50_000, "amount_usd": -1.7e308, "status": "success"}]
    batch = [source_batch([(purchase, json.dumps(e).encode(), NOW) for e in events])]
    fast = rows(FAST, batch)
    assert fast == rows(REFERENCE, batch)
    assert sum('"overflow"' in r for r in fast) >= 1


def test_a_sum_at_the_edge_of_int64_is_kept_and_one_past_it_overflows() -> None:
    gift = "persistent://bigolive/live/gift_send"
    top = 2**63 - 1
    events = [{"uid": 5, "ts": NOW - 60_000, "gift": {"diamonds": top - 1}}]
    events += [{"uid": 5, "ts": NOW - 59_000, "gift": {"diamonds": 1}}]  # exactly int64's top: kept
    events += [{"uid": 5, "ts": NOW - 58_000, "gift": {"diamonds": 1}}]  # one past: overflow
    events += [{"uid": 6, "ts": NOW - 60_000, "gift": {"diamonds": -(2**63)}}]  # int64's bottom: kept
    batch = [source_batch([(gift, json.dumps(e).encode(), NOW) for e in events])]
    fast = rows(FAST, batch)
    assert fast == rows(REFERENCE, batch)
    assert sum('"overflow"' in r for r in fast) == 1
    # the handler itself takes the sum up to int64's top and leaves one past it to the reference
    handler, (hourly, _daily) = _handler(gift)
    for diamonds, taken in ((top - 1, True), (1, True), (1, False)):
        event = json.dumps({"uid": 5, "ts": NOW - 60_000, "gift": {"diamonds": diamonds}}).encode()
        assert (handler(event, NOW) is not None) is taken
    (row,) = hourly.rows.values()
    assert row[hourly.index["gift_diamonds_sent"]] == top

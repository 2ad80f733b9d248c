"""The typed decoder in front of the fast path: it takes only what the ``orjson`` path takes, alike.

Expected values come from the reference path (``parse_event`` + ``fold_event``, through
``transform`` with the fast path off) and from ``orjson`` itself, never from the decoder.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.stream.test_fastpath import CATALOG, FAST, NOW, REFERENCE, _handler, rows, source_batch
from widehouse.catalog.semantics.fold import WideRows
from widehouse.catalog.types import Field, FieldType
from widehouse.stream import decoders, fastpath

GIFT_SEND = "persistent://bigolive/live/gift_send"
PURCHASE = "persistent://bigolive/commerce/purchase"
PAGE_VIEW = "persistent://bigolive/app/page_view"
TS = NOW - 60_000


def _counts(handler: fastpath.Handler) -> list[int]:
    """The handler's [typed decodes, misses] (decodes negative: the typed decoder is off)."""
    counts: list[int] = handler.__globals__["TS"]
    return counts


GIFT = b'"gift": {"id": 7, "name": "rose", "diamonds": 1314, "is_lucky": true}'
GIFT_EVENT = b'{"uid": 1, "ts": %d, %s}' % (TS, GIFT)


def _purchase(amount: bytes) -> bytes:
    return b'{"uid": 1, "ts": %d, "amount_usd": %s, "status": "success"}' % (TS, amount)


# Payloads on which the two JSON parsers differ, or where a typed form could change a value. Each
# goes through the whole transform with the fast path and without it: the rows must be the same.
EDGES: list[tuple[str, bytes]] = [
    # msgspec skips an unknown field without checking its UTF-8 or a number's range; orjson rejects
    (GIFT_SEND, b'{"uid": 1, "ts": %d, "x": "\xff"}' % TS),
    (GIFT_SEND, b'{"uid": 1, "ts": %d, "x": 1e400}' % TS),
    (GIFT_SEND, b'{"uid": 1, "ts": %d, "gift": {"id": 7, "x": "\xfe"}}' % TS),
    (GIFT_SEND, b'{"uid": 1, "ts": %d, "gift": {"id": 7, "x": -1e999}}' % TS),
    # known fields: invalid UTF-8, lone surrogates, numbers beyond int64 / uint64 / a double
    (GIFT_SEND, b'{"uid": 1, "ts": %d, "gift": {"name": "\xff"}}' % TS),
    (GIFT_SEND, b'{"uid": 1, "ts": %d, "gift": {"name": "\\ud800"}}' % TS),
    (GIFT_SEND, b'{"uid": 99999999999999999999999, "ts": %d}' % TS),
    (GIFT_SEND, b'{"uid": 18446744073709551615, "ts": %d}' % TS),
    (GIFT_SEND, b'{"uid": -9223372036854775809, "ts": %d}' % TS),
    (GIFT_SEND, b'{"uid": -9223372036854775808, "ts": %d}' % TS),
    (GIFT_SEND, b'{"uid": 1e2, "ts": %d}' % TS),
    (GIFT_SEND, b'{"uid": 1.0, "ts": %d}' % TS),
    (GIFT_SEND, b'{"uid": -0, "ts": %d}' % TS),
    (GIFT_SEND, b'{"uid": true, "ts": %d}' % TS),
    (GIFT_SEND, b'{"uid": "1", "ts": %d}' % TS),
    (GIFT_SEND, b'{"uid": 1, "ts": %d, "gift": {"id": 2147483648}}' % TS),
    (GIFT_SEND, b'{"uid": 1, "ts": %d, "gift": {"is_lucky": 1}}' % TS),
    # doubles: an integer (the reference converts it), out of range, huge and tiny literals
    (PURCHASE, _purchase(b"3")),
    (PURCHASE, _purchase(b"99999999999999999999999")),
    (PURCHASE, _purchase(b"1e400")),
    (PURCHASE, _purchase(b"1.5e-400")),
    (PURCHASE, _purchase(b"-0.0")),
    (PURCHASE, _purchase(b"1.0000000000000000000000001")),
    (PURCHASE, _purchase(b"123456789012345678901234567890.0")),
    (PURCHASE, _purchase(b"true")),
    # duplicate and escaped keys, whitespace, trailing content, other documents
    (GIFT_SEND, b'{"uid": 1, "uid": 2, "ts": %d}' % TS),
    (GIFT_SEND, b'{"uid": 1, "ts": %d, "uid": null}' % TS),
    (GIFT_SEND, b'{"u\\u0069d": 3, "ts": %d}' % TS),
    (GIFT_SEND, b'{"uid": 1, "ts": %d, "gift": {"name": "a", "name": "b"}}' % TS),
    (GIFT_SEND, b' \t{"uid": 1, "ts": %d}\r\n ' % TS),
    (GIFT_SEND, b'{"uid": 1, "ts": %d} x' % TS),
    (GIFT_SEND, b'{"uid": 1, "ts": %d,}' % TS),
    (GIFT_SEND, b'\xef\xbb\xbf{"uid": 1, "ts": %d}' % TS),
    (GIFT_SEND, b'{"uid": 1, "ts": %d, "gift": {"name": "a\\u0000b"}}' % TS),
    (GIFT_SEND, b"[1]"),
    (GIFT_SEND, b"null"),
    (GIFT_SEND, b'{"uid": 1, "ts": %d, "gift": [1]}' % TS),
    (GIFT_SEND, b'{"uid": 1, "ts": %d, "gift": null}' % TS),
    (GIFT_SEND, b'{"uid": 1, "ts": %d, "x": ' % TS + b"[" * 3000 + b"]" * 3000 + b"}"),
    # arrays and maps of scalars
    (PAGE_VIEW, b'{"uid": 1, "ts": %d, "page": "home", "tags": ["a", null, "b"]}' % TS),
    (PAGE_VIEW, b'{"uid": 1, "ts": %d, "page": "home", "tags": ["a", 3]}' % TS),
    (PAGE_VIEW, b'{"uid": 1, "ts": %d, "page": "home", "tags": {"0": "a"}}' % TS),
    (PAGE_VIEW, b'{"uid": 1, "ts": %d, "page": "home", "tags": ["\xff"]}' % TS),
    # clean events, for contrast
    (GIFT_SEND, GIFT_EVENT),
    (PURCHASE, _purchase(b"3.5")),
]


@pytest.mark.parametrize(("topic", "payload"), EDGES, ids=[repr(p[:48]) for _, p in EDGES])
def test_payloads_the_parsers_disagree_on_give_the_reference_rows(topic: str, payload: bytes) -> None:
    batch = [source_batch([(topic, payload, NOW)])]
    assert rows(FAST, batch) == rows(REFERENCE, batch)


def test_a_clean_event_is_decoded_typed_and_folded() -> None:
    handler, (hourly, _daily) = _handler(GIFT_SEND)
    assert handler(GIFT_EVENT, NOW) == TS
    assert _counts(handler) == [1, 0]  # decoded typed, nothing missed
    (row,) = hourly.rows.values()
    assert row[hourly.index["gift_diamonds_sent"]] == 1314
    assert row[hourly.index["lucky_gifts_sent"]] == 1


def test_an_undeclared_field_goes_to_the_json_path_and_is_still_folded() -> None:
    """The contract accepts and ignores unknown fields; the typed decoder refuses them."""
    handler, (hourly, _daily) = _handler(GIFT_SEND)
    event = b'{"uid": 1, "ts": %d, "added_later": [1, {"a": 2}], "gift": {"diamonds": 5, "new": 1}}' % TS
    assert handler(event, NOW) == TS
    assert _counts(handler) == [1, 1]
    (row,) = hourly.rows.values()
    assert row[hourly.index["gift_diamonds_sent"]] == 5


def test_a_topic_whose_events_the_decoder_keeps_missing_leaves_it_for_the_task() -> None:
    """Missing a quarter of its tries, at least TYPED_MISSES of them: the handler stops trying;
    bad events now and then (1 % of a topic's) never turn it off."""
    handler, (hourly, _daily) = _handler(GIFT_SEND)
    extra = b'{"uid": 2, "ts": %d, "added_later": 1}' % TS
    for _ in range(300):
        assert handler(GIFT_EVENT, NOW) == TS
    for _ in range(fastpath.TYPED_MISSES):
        assert handler(extra, NOW) == TS
    assert _counts(handler) == [364, 64]  # 64 misses of 364 tries: still on
    for _ in range(35):
        assert handler(extra, NOW) == TS
    assert _counts(handler) == [399, 99]  # 4 x 99 < 399
    assert handler(extra, NOW) == TS
    assert _counts(handler) == [-1, 100]  # 4 x 100 >= 400: off
    assert handler(extra, NOW) == TS  # off: the JSON path alone, still folding
    assert handler(GIFT_EVENT, NOW) == TS
    assert _counts(handler) == [-1, 100]
    (second,) = [row for key, row in hourly.rows.items() if key[0] == 2]
    assert second[hourly.index["gifts_sent"]] == 101
    another, _ = _handler(GIFT_SEND)
    assert _counts(another) == [0, 0]  # each task's handler decides for itself


def test_topics_of_one_shape_share_one_decoder_and_kinds_without_a_typed_form_get_none() -> None:
    gift = CATALOG.topic(GIFT_SEND)
    assert decoders.decoder(gift.fields) is decoders.decoder(replace(gift).fields)
    objects = FieldType("array", element=FieldType("object", fields=(Field("a", FieldType("long")),)))
    assert decoders.decoder((Field("uid", FieldType("long")), Field("items", objects))) is None


def test_a_topic_without_a_typed_form_keeps_the_json_path_alone() -> None:
    topic = CATALOG.topic(GIFT_SEND)
    objects = FieldType("array", element=FieldType("object", fields=(Field("a", FieldType("long")),)))
    plain = replace(topic, fields=(*topic.fields, Field("items", objects)))
    tables = [WideRows(CATALOG.table(name)) for name in plain.tables]
    handler = fastpath.compile_handler(plain, tables, CATALOG.rules, CATALOG.max_payload_bytes)
    assert handler is not None and handler.__doc__ is not None
    assert "json_handle" not in handler.__doc__ and "TS" not in handler.__globals__
    assert handler(GIFT_EVENT, NOW) == TS


def test_only_struct_fields_something_reads_are_read() -> None:
    """The decoder checked every field already; the handler reads only what its rules use."""
    lines = [
        "    f0 = d.f0",
        "    f2 = d.f2",
        "    f4 = d.f4",
        "    f4_0 = f4_1 = None",
        "    if f4 is not None:",
        "        f4_0 = f4.f0",
        "        f4_1 = f4.f1",
        "    f5 = d.f5",
        "    f5_0 = None",
        "    if f5 is not None:",
        "        f5_0 = f5.f0",
        "        if f5_0 is not None:",
        "            f5_0_0 = f5_0.f0",
    ]
    kept = fastpath._unread_fields_unread(lines, ["    k0 = (f0, f4_1)", "    return f0"])
    assert kept == [lines[0], *lines[2:5], lines[6]]  # f2, f4_0 and all of f5 unread


@settings(max_examples=400, deadline=None)
@given(
    value=st.floats(allow_nan=False, allow_infinity=False)
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.builds(
        lambda m, e: f"{m}e{e}",
        st.integers(min_value=-(10**25), max_value=10**25),
        st.integers(min_value=-330, max_value=330),
    )
    | st.decimals(allow_nan=False, allow_infinity=False, places=30).map(str)
)
def test_a_double_decodes_to_what_orjson_reads(value: Any) -> None:
    """Numbers as producers write them: either parser's value, or both refuse."""
    text = value if isinstance(value, str) else json.dumps(value)
    payload = b'{"uid": 1, "ts": %d, "amount_usd": %s, "status": "success"}' % (TS, text.encode())
    try:
        expected = orjson.loads(payload)["amount_usd"]
    except orjson.JSONDecodeError:
        expected = None  # the typed decoder must refuse it too
    fields = CATALOG.topic(PURCHASE).fields
    decode = decoders.decoder(fields)
    assert decode is not None
    try:
        got = getattr(decode(payload), f"f{[f.name for f in fields].index('amount_usd')}")
    except Exception:
        return  # refused: the JSON path decides (the edge cases above hold the rows equal)
    if type(got) is not float:
        assert type(got) is int  # an integer: the handler sends it to the reference path
        return
    assert type(expected) is float and got == expected
    assert math.copysign(1, got) == math.copysign(1, expected)

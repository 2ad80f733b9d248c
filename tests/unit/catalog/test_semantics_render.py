"""Bounded rendering of values and exceptions for quarantine details (hardening issue, item 1).

Expected texts are written by hand, or are Python's own ``repr`` (an independent oracle) where the
value is small enough for ``repr`` to be safe.
"""

from __future__ import annotations

import time
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from widehouse.catalog.semantics.render import render_exception, render_value


def test_a_list_nested_1023_levels_renders_three_levels_and_dots() -> None:
    deep = orjson.loads(b"[" * 1023 + b"]" * 1023)  # the deepest orjson returns to the parser
    assert render_value(deep) == "[[[[...]]]]"
    assert render_value(orjson.loads(b'{"a":' * 1000 + b"1" + b"}" * 1000)) == "{'a': {'a': {'a': {...}}}}"


def test_a_10_mb_string_renders_60_characters_without_being_copied_whole() -> None:
    huge = "x" * 10_000_000
    start = time.perf_counter()
    for _ in range(100):
        text = render_value(huge)
    per_call = (time.perf_counter() - start) / 100
    assert text == "'" + "x" * 56 + "..."
    assert len(text) == 60
    assert per_call < 0.001  # repr would copy 10 MB (milliseconds); a 61-character slice is microseconds
    assert render_value(b"\xff" * 10_000_000, limit=20) == "b'\\xff\\xff\\xff\\xf..."


def test_a_huge_list_and_dict_are_read_only_as_far_as_printed() -> None:
    assert render_value(list(range(1_000_000))) == "[" + ", ".join(str(i) for i in range(17)) + "..."
    assert render_value({f"k{i}": i for i in range(100_000)}, limit=24) == "{'k0': 0, 'k1': 1, 'k..."

    class Counting(list[int]):
        read = 0

        def __iter__(self) -> Any:
            for item in list.__iter__(self):
                self.read += 1
                yield item

    counting = Counting(range(1_000_000))
    assert render_value(counting, limit=20) == "[0, 1, 2, 3, 4, 5..."
    assert counting.read == 9  # 0..7 rendered (", 7" passes the limit), then 8 read and dropped


def test_values_python_cannot_print_or_that_fail_render_as_their_type() -> None:
    assert render_value(2**20_000) == "<int of 20001 bits>"  # repr raises past int_max_str_digits

    class Hostile:
        def __repr__(self) -> str:
            raise RuntimeError("no")

    class BadList(list[int]):
        def __iter__(self) -> Any:
            raise RuntimeError("no")

    assert render_value(Hostile()) == "<Hostile>"
    assert render_value(BadList([1])) == "<BadList>"
    assert render_value([1, Hostile()]) == "[1, <Hostile>]"


def test_small_values_render_exactly_as_repr() -> None:
    for value in (
        None,
        True,
        0,
        -(2**63),
        1.5,
        -0.0,
        1e308,
        "",
        "it's",
        "\ud800",
        "é\u2028",
        [1, "a"],
        {"a": None},
    ):
        assert render_value(value) == repr(value), value


def test_a_tiny_limit_is_still_a_bounded_text() -> None:
    assert render_value("abcdefgh", limit=4) == "'..."
    assert render_value([1, 2], limit=0) == "[..."  # at least 4 characters: a cut is always visible


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(st.characters(codec=None, exclude_categories=()), max_size=80),
    lambda children: (
        st.lists(children, max_size=6) | st.dictionaries(st.text(max_size=6), children, max_size=6)
    ),
    max_leaves=30,
)


def _depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    return 0


def _quotes(value: Any) -> bool:
    if isinstance(value, str):
        return "'" in value
    if isinstance(value, list):
        return any(_quotes(v) for v in value)
    if isinstance(value, dict):
        return any(_quotes(k) or _quotes(v) for k, v in value.items())
    return False


@settings(max_examples=300, deadline=None)
@given(value=json_values, limit=st.integers(min_value=4, max_value=120))
def test_any_json_value_renders_within_the_limit_and_as_repr_when_it_fits(value: Any, limit: int) -> None:
    text = render_value(value, limit=limit)
    assert len(text) <= limit
    full = repr(value)
    if len(full) <= limit and _depth(value) <= 3:
        assert text == full
    elif _depth(value) <= 3:  # cut: a prefix of repr (a cut string may pick other quotes) and "..."
        assert len(text) == limit and text.endswith("...")
        if not _quotes(value):  # else repr may pick other quotes for the whole than for a prefix
            assert text[: limit - 3] == full[: limit - 3]


def test_exceptions_render_as_class_and_bounded_message() -> None:
    assert render_exception(RecursionError("maximum recursion depth exceeded")) == (
        "RecursionError: maximum recursion depth exceeded"
    )
    assert render_exception(KeyError()) == "KeyError"
    assert render_exception(ValueError("bad \ud800")) == "ValueError: bad \\ud800"  # still valid UTF-8
    long = render_exception(ValueError("v" * 10_000))
    assert long == "ValueError: " + "v" * 185 + "..." and len(long) == 200

    class UnprintableError(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    assert render_exception(UnprintableError()) == "UnprintableError: <message not renderable>"

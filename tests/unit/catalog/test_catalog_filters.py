"""The filter language: parsing, type checks, Spark SQL rendering and SQL three-valued evaluation."""

from __future__ import annotations

from typing import Any

import pytest

from widehouse.catalog.filters import FilterError, parse_filter

TYPES = {
    ("status",): "string",
    ("amount",): "double",
    ("qty",): "long",
    ("ts",): "timestamp-ms",
    ("vip",): "boolean",
    ("item", "price"): "long",
    ("item", "name"): "string",
}


def resolve(path: tuple[str, ...]) -> str:
    if path not in TYPES:
        raise FilterError(f"no field {'.'.join(path)!r}")
    return TYPES[path]


@pytest.mark.parametrize(
    ("text", "sql"),
    [
        ("status = 'ok'", "(`status` = 'ok')"),
        ("status == 'ok' AND qty > 3", "((`status` = 'ok') AND (`qty` > 3))"),
        ("status != 'ok' or not vip", "((`status` <> 'ok') OR (NOT (`vip` = true)))"),
        ("item.price >= 1000", "(`item`.`price` >= 1000)"),
        ("amount < 1.5", "(`amount` < 1.5D)"),
        ("qty <> -2", "(`qty` <> -2)"),
        ("qty = 5000000000", "(`qty` = 5000000000L)"),
        ("status in ('a', 'b')", "(`status` IN ('a', 'b'))"),
        ("status not in ('a')", "(`status` NOT IN ('a'))"),
        ("item.name is null", "(`item`.`name` IS NULL)"),
        (
            "item.name is not null and (qty = 1 or qty = 2)",
            "((`item`.`name` IS NOT NULL) AND ((`qty` = 1) OR (`qty` = 2)))",
        ),
        ("vip = false", "(`vip` = false)"),
        ("qty < item.price", "(`qty` < `item`.`price`)"),
        ("ts > 1700000000000", "(`ts` > 1700000000000L)"),
        ('status = "café ☕"', "(`status` = 'café ☕')"),
    ],
)
def test_renders_to_spark_sql(text: str, sql: str) -> None:
    assert parse_filter(text, resolve).to_spark_sql() == sql


def test_rendering_can_map_fields_to_any_column_expression() -> None:
    parsed = parse_filter("item.price > 10 and vip", resolve)
    assert parsed.to_spark_sql(lambda p: "e." + "_".join(p)) == "((e.item_price > 10) AND (e.vip = true))"
    assert parsed.fields == frozenset({("item", "price"), ("vip",)})


@pytest.mark.parametrize(
    ("text", "row", "expected"),
    [
        ("status = 'ok'", {"status": "ok"}, True),
        ("status = 'ok'", {"status": None}, False),
        ("not status = 'ok'", {"status": None}, False),  # not unknown is unknown: not true
        ("status = 'ok' or qty > 1", {"status": None, "qty": 2}, True),
        ("status = 'ok' and qty > 1", {"status": None, "qty": 0}, False),
        ("not (status = 'ok' and qty > 1)", {"status": None, "qty": 0}, True),
        ("status not in ('a', 'b')", {"status": None}, False),
        ("status not in ('a', 'b')", {"status": "c"}, True),
        ("item.price >= 1000", {"item": {"price": 1000}}, True),
        ("item.price >= 1000", {"item": None}, False),
        ("item.name is null", {"item": None}, True),
        ("item.name is not null", {"item": {"name": "x"}}, True),
        ("vip", {"vip": None}, False),
        ("not vip", {"vip": False}, True),
        ("amount > 1", {"amount": 1.5}, True),
        ("amount > qty", {"amount": 2.5, "qty": 2}, True),
    ],
)
def test_python_evaluation_follows_sql_three_valued_logic(
    text: str, row: dict[str, Any], expected: bool
) -> None:
    assert parse_filter(text, resolve).predicate()(row) is expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty filter"),
        ("status =", "expected a field or a literal"),
        ("status = 'ok' and", "expected a field or a literal"),
        ("(status = 'ok'", "expected ')'"),
        ("status = 'ok')", "unexpected ')'"),
        ("colour = 'red'", "no field 'colour'"),
        ("status = 3", "cannot compare status (string) with 3 (long)"),
        ("vip > true", "booleans compare only with = and !="),
        ("qty", "qty is long, not boolean"),
        ("1 = 1", "compares two literals"),
        ("status = 'it''s'", "unexpected"),
        ("status = 'a\\'b'", "quote, backslash or control character"),
        ("status = null", "is null"),
        ("status in (1, 2)", "the list has 1 (long)"),
        ("status is 'x'", "expected 'null' after 'is'"),
        ("status; drop table x", "unexpected ';"),
        ("qty = 99999999999999999999", "does not fit in 64 bits"),
        ("upper(status) = 'A'", "unexpected '('"),
        ("qty + 1 > 2", "unexpected '+"),
        ("(" * 40 + "vip" + ")" * 40, "deeper than"),
        ("status = 'x' -- comment", "unexpected '-"),
    ],
)
def test_bad_filters_are_rejected_with_a_reason(text: str, message: str) -> None:
    with pytest.raises(FilterError) as caught:
        parse_filter(text, resolve)
    assert message in str(caught.value)

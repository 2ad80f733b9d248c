"""Reference aggregation semantics (the oracle of the manifest and the streaming job)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from catalog_samples import Writer

from widehouse.catalog import Catalog, load_catalog
from widehouse.catalog.semantics.fold import WideRows, aggregate, compile_rules, contribute
from widehouse.contracts.periods import HOUR_MS

T0 = 1_778_400_000_000  # 2026-05-10T08:00:00Z, an hour start


@pytest.fixture
def catalog(write_catalog: Writer) -> Catalog:
    return load_catalog(
        write_catalog(
            replace={
                "schemas/tables/shop_hourly.yaml": (
                    "  - big_orders\n",
                    "  - big_orders\n  - first_city\n  - max_price\n",
                ),
                "schemas/topics/acme/shop/pay.yaml": (
                    "  shop_daily:",
                    "    first_city: first(city)\n    max_price: max(item.price)\n  shop_daily:",
                ),
            }
        )
    )


def row(city: str | None, amount: float | None, price: int | None = 10) -> dict[str, Any]:
    return {"city": city, "amount": amount, "item": {"price": price, "sku": None}, "uid": 1, "ts": 0}


def test_aggregates_filters_and_nulls(catalog: Catalog) -> None:
    pay = catalog.topic("persistent://acme/shop/pay")
    events = [
        (pay, 1, T0 + 10, row("Lyon", 2.5, 2000)),
        (pay, 1, T0 + 20, row(None, None, None)),  # nulls count as events but add no values
        (pay, 1, T0 + 5, row("Nice", 1.0, 3000)),
        (
            pay,
            2,
            T0 + HOUR_MS + 1,
            row("Paris", 4.0, 5000),
        ),  # Paris is excluded from big_orders by the filter
    ]
    result = aggregate(catalog, events)
    hourly = result["shop_hourly"]
    assert hourly[(1, T0)] == {
        "orders": 3,
        "spent": 3.5,
        "last_city": "Lyon",  # by event time, not arrival order
        "first_city": "Nice",
        "big_orders": 2,
        "max_price": 3000,
    }
    assert hourly[(2, T0 + HOUR_MS)]["big_orders"] == 0
    daily = result["shop_daily"]
    day = T0 - T0 % 86_400_000
    assert daily[(1, day)] == {"orders": 3, "spent": 3.5}
    assert daily[(2, day)] == {"orders": 1, "spent": 4.0}


def test_a_row_exists_even_when_every_filter_rejects_the_event(catalog: Catalog) -> None:
    pay = catalog.topic("persistent://acme/shop/pay")
    result = aggregate(catalog, [(pay, 7, T0, row(None, None, None))])
    assert result["shop_hourly"][(7, T0)] == {
        "orders": 1,
        "spent": None,
        "last_city": None,
        "first_city": None,
        "big_orders": 0,
        "max_price": None,
    }


def test_first_and_last_break_event_time_ties_by_value(catalog: Catalog) -> None:
    pay = catalog.topic("persistent://acme/shop/pay")
    events = [(pay, 1, T0 + 1, row(city, 1.0)) for city in ("b", "c", "a")]
    hourly = aggregate(catalog, events)["shop_hourly"][(1, T0)]
    assert (hourly["first_city"], hourly["last_city"]) == ("a", "c")


def test_merging_partial_states_in_any_split_equals_one_pass(catalog: Catalog) -> None:
    """What sinks do: merge partial rows from batches. Any split and order must give the same result."""
    pay = catalog.topic("persistent://acme/shop/pay")
    table = catalog.table("shop_hourly")
    rules = compile_rules(pay, table)
    rng = random.Random(3)
    events = [
        (
            rng.randrange(3),
            T0 + rng.randrange(2 * HOUR_MS),
            row(rng.choice(["a", "b", None]), rng.choice([1.0, None, 2.5]), rng.choice([None, 5, 5000])),
        )
        for _ in range(300)
    ]
    whole = WideRows(table)
    for key, ts, values in events:
        contribute(whole, rules, key, ts, values)
    for _ in range(5):
        rng.shuffle(events)
        cut = rng.randrange(len(events))
        batches = [WideRows(table), WideRows(table)]
        for index, (key, ts, values) in enumerate(events):
            contribute(batches[index >= cut], rules, key, ts, values)
        merged = WideRows(table)
        for batch in batches:
            for row_key, state in batch.rows.items():
                target = merged.rows.setdefault(row_key, list(merged.empty))
                merged.merge_state(target, state)
        _assert_close(merged.final(), whole.final())


def _assert_close(a: dict[Any, dict[str, Any]], b: dict[Any, dict[str, Any]]) -> None:
    assert a.keys() == b.keys()
    for key, values in a.items():
        for column, value in values.items():
            other = b[key][column]
            if isinstance(value, float):
                assert value == pytest.approx(other), (key, column)
            else:
                assert value == other, (key, column)

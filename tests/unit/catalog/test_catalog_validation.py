"""Every class of catalog mistake is rejected with an error naming the file, the culprit and the problem."""

from __future__ import annotations

from pathlib import Path

import pytest
from catalog_samples import PAY, Writer

from widehouse.catalog import CatalogValidationError, load_catalog
from widehouse.errors import CatalogError

PAY_FILE = "schemas/topics/acme/shop/pay.yaml"
HOURLY_FILE = "schemas/tables/shop_hourly.yaml"
DAILY_FILE = "schemas/tables/shop_daily.yaml"

SECOND_TOPIC = """\
topic: persistent://acme/shop/refund
key: uid
event_time: ts
fields:
  uid: long
  ts: timestamp-ms
  qty: long
  amount: double
columns:
  shop_hourly:
    spent: {SPENT}
"""

# (id, edits, replace, substrings the error must contain)
Case = tuple[str, dict[str, str], dict[str, tuple[str, str]], list[str]]


def case(name: str, path: str, old: str, new: str, *expected: str) -> Case:
    """The mistake ``name``: ``old`` replaced by ``new`` in the file ``path``; the error must name the
    file and contain each of ``expected``."""
    return (name, {}, {path: (old, new)}, [Path(path).name, *expected])


CASES = [
    case(
        "unknown type",
        PAY_FILE,
        "amount: {type: double",
        "amount: {type: float",
        "fields.amount",
        "unknown type 'float'",
    ),
    case(
        "unknown nested type",
        PAY_FILE,
        "sku: string",
        "sku: varchar",
        "fields.item.fields.sku",
        "unknown type 'varchar'",
    ),
    case(
        "map with non-string keys",
        PAY_FILE,
        '"map<string,long>"',
        '"map<long,long>"',
        "fields.attrs",
        "map keys must be string",
    ),
    case(
        "object without fields",
        PAY_FILE,
        "tags: array<string>",
        "tags: object",
        "fields.tags",
        "needs a non-empty 'fields'",
    ),
    case("missing key", PAY_FILE, "key: uid\n", "", "missing required key 'key'"),
    case(
        "key is not a field",
        PAY_FILE,
        "key: uid",
        "key: user_id",
        "key",
        "key field 'user_id' is not a top-level field",
    ),
    case("key of a wrong type", PAY_FILE, "key: uid", "key: amount", "must be long or string"),
    case("missing event time", PAY_FILE, "event_time: ts\n", "", "missing required key 'event_time'"),
    case(
        "event time not a timestamp",
        PAY_FILE,
        "  ts: timestamp-ms",
        "  ts: long",
        "event_time",
        "'ts' is long; it must be timestamp-ms",
    ),
    case(
        "aggregate that cannot merge",
        PAY_FILE,
        "spent: sum(amount)\n    last_city",
        "spent: avg(amount)\n    last_city",
        "columns.shop_hourly.spent",
        "'avg' cannot merge across micro-batches",
    ),
    case(
        "distinct count cannot merge",
        PAY_FILE,
        "orders: count\n    spent: sum(amount)\n    last",
        "orders: {agg: count_distinct, field: city}\n    spent: sum(amount)\n    last",
        "columns.shop_hourly.orders",
        "cannot merge",
    ),
    case(
        "unknown aggregate",
        PAY_FILE,
        "last_city: last(city)",
        "last_city: latest(city)",
        "columns.shop_hourly.last_city",
        "unknown aggregate 'latest'",
    ),
    case(
        "count with a field",
        PAY_FILE,
        "orders: count\n    spent: sum(amount)\n    last",
        "orders: count(city)\n    spent: sum(amount)\n    last",
        "count takes no field",
        "city is not null",
    ),
    case(
        "sum of a string",
        PAY_FILE,
        "spent: sum(amount)\n    last_city",
        "spent: sum(city)\n    last_city",
        "columns.shop_hourly.spent",
        "sum needs a numeric field; 'city' is string",
    ),
    case(
        "max of a boolean-free path into a scalar",
        PAY_FILE,
        "last_city: last(city)",
        "last_city: last(city.name)",
        "'city' is string; only objects have sub-fields",
    ),
    case(
        "aggregate of an array",
        PAY_FILE,
        "last_city: last(city)",
        "last_city: last(tags)",
        "'tags' is array<string>, not a scalar",
    ),
    case(
        "unknown source field", PAY_FILE, "last_city: last(city)", "last_city: last(town)", "no field 'town'"
    ),
    case(
        "column with no producer",
        HOURLY_FILE,
        "  - big_orders\n",
        "  - big_orders\n  - refunds\n",
        "columns.refunds",
        "no producer",
    ),
    (
        "producers disagree on the type",
        {"schemas/topics/acme/shop/refund.yaml": SECOND_TOPIC.replace("{SPENT}", "sum(qty)")},
        {},
        [
            "shop_hourly.yaml",
            "columns.spent",
            "disagree",
            "pay.yaml maps sum(amount) -> double",
            "refund.yaml maps sum(qty) -> long",
        ],
    ),
    (
        "producers disagree on the aggregate",
        {"schemas/topics/acme/shop/refund.yaml": SECOND_TOPIC.replace("{SPENT}", "max(amount)")},
        {},
        ["shop_hourly.yaml", "disagree", "max(amount)"],
    ),
    (
        "duplicate topic",
        {"schemas/topics/acme/shop/pay_copy.yaml": PAY},
        {},
        ["pay_copy.yaml", "duplicate topic persistent://acme/shop/pay", "pay.yaml"],
    ),
    (
        "duplicate wide table",
        {
            "schemas/tables/again.yaml": "wide_table: shop_hourly\ngrain: hour\n"
            "key: {name: uid, type: long}\ncolumns: [orders]\n"
        },
        {},
        ["again.yaml", "duplicate wide table 'shop_hourly'"],
    ),
    case(
        "duplicate YAML key",
        PAY_FILE,
        "  tags: array<string>\n",
        "  tags: array<string>\n  city: string\n",
        "duplicate key 'city'",
        "first defined on line",
    ),
    case("unknown key (typo)", PAY_FILE, "traffic:", "trafic:", "unknown key 'trafic'"),
    case(
        "unsafe field name",
        PAY_FILE,
        "  city: {type",
        "  City-Name: {type",
        "fields.City-Name",
        "not a safe identifier",
    ),
    case(
        "SQL in a column name",
        HOURLY_FILE,
        "  - last_city\n",
        '  - "last_city; DROP TABLE x"\n',
        "not a safe identifier",
    ),
    case(
        "unsafe table name",
        HOURLY_FILE,
        "wide_table: shop_hourly",
        "wide_table: shop.hourly",
        "wide table name 'shop.hourly' is not a safe identifier",
    ),
    case(
        "column not declared in the table",
        PAY_FILE,
        "last_city: last(city)",
        "last_town: last(city)",
        "shop_hourly has no column 'last_town'",
        "declare it in schemas/tables/shop_hourly.yaml",
    ),
    case(
        "unknown wide table",
        PAY_FILE,
        "  shop_daily:\n",
        "  shop_weekly:\n",
        "unknown wide table 'shop_weekly'",
    ),
    case(
        "filter on an unknown field",
        PAY_FILE,
        "item.price >= 1000",
        "item.cost >= 1000",
        "columns.shop_hourly.big_orders.filter",
        "no field 'item.cost'",
    ),
    case(
        "filter syntax",
        PAY_FILE,
        "item.price >= 1000 and",
        "item.price >= and",
        "big_orders.filter",
        "expected a field or a literal at position 14",
    ),
    case(
        "filter type mismatch",
        PAY_FILE,
        "item.price >= 1000",
        "item.price >= 'a lot'",
        "cannot compare item.price (long) with 'a lot' (string)",
    ),
    case(
        "filter injection attempt",
        PAY_FILE,
        "city != 'Paris'",
        "city != 'x' or 1 = 1",
        "compares two literals",
    ),
    case(
        "filter with a quote inside a string",
        PAY_FILE,
        "city != 'Paris'",
        "city != 'Pa\\\"ris'",
        "big_orders.filter",
    ),
    case(
        "topic name not fully qualified",
        PAY_FILE,
        "topic: persistent://acme/shop/pay",
        "topic: acme/shop/pay",
        "not a full Pulsar topic name",
    ),
    case(
        "non-persistent topic",
        PAY_FILE,
        "topic: persistent://",
        "topic: non-persistent://",
        "must be persistent://",
    ),
    case(
        "key type differs from the table's",
        PAY_FILE,
        "  uid: long",
        "  uid: string",
        "key field 'uid' is string but shop_hourly's key 'uid' is long",
    ),
    case("reserved column name", HOURLY_FILE, "  - orders\n", "  - hour\n", "'hour' is reserved"),
    case("column named like the key", HOURLY_FILE, "  - orders\n", "  - uid\n", "'uid' is reserved"),
    case("unknown grain", HOURLY_FILE, "grain: hour", "grain: minute", "grain", "must be hour or day"),
    case(
        "offline columns on an hourly table",
        HOURLY_FILE,
        "columns:",
        "offline: []\ncolumns:",
        "offline",
        "day-grain table only",
    ),
    (
        "offline SQL file missing",
        {"sql/hive/shop_daily_payments.sql": None},
        {},
        ["shop_daily.yaml", "offline[0].sql", "does not exist"],
    ),
    case(
        "offline SQL path escapes sql/",
        DAILY_FILE,
        "sql: hive/shop_daily_payments.sql",
        "sql: ../secrets.sql",
        "must be a relative path",
    ),
    case(
        "offline column clashes with a stream column",
        DAILY_FILE,
        "pay_orders: long",
        "orders: long",
        "'orders' is also a stream column",
    ),
    case(
        "offline column of an unknown type",
        DAILY_FILE,
        "pay_orders: long",
        "pay_orders: decimal",
        "offline[0].columns.pay_orders",
        "type 'decimal'",
    ),
    case(
        "generator hint of the wrong type",
        PAY_FILE,
        "price: {type: long, values: [10, 2000]}",
        "price: {type: long, values: [10, cheap]}",
        "fields.item.fields.price.values",
        "'cheap' is not a long",
    ),
    case("range on a string", PAY_FILE, "values: [yes, no, Paris]", "range: [1, 2]", "range is for numbers"),
    case("bad traffic hint", PAY_FILE, "partitions: 3", "partitions: 0", "traffic.partitions", "1..1024"),
    case("invalid YAML", PAY_FILE, "fields:\n", "fields: [\n", "invalid YAML"),
    (
        "bad event-time rule",
        {"schemas/catalog.yaml": "event_time: {lateness: 1hour}\n"},
        {},
        ["catalog.yaml", "event_time.lateness", "'1hour' is not a duration"],
    ),
    ("stray file at the top level", {"schemas/pay.yaml": PAY}, {}, ["schemas/pay.yaml", "unexpected file"]),
]


@pytest.mark.parametrize(("edits", "replace", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_mistake_is_named(
    write_catalog: Writer,
    edits: dict[str, str | None],
    replace: dict[str, tuple[str, str]],
    expected: list[str],
) -> None:
    root = write_catalog(edits, replace)
    with pytest.raises(CatalogValidationError) as caught:
        load_catalog(root)
    message = str(caught.value)
    for part in expected:
        assert part in message, f"{part!r} not in:\n{message}"
    assert isinstance(caught.value, CatalogError)


def test_every_problem_is_reported_at_once_with_lines(write_catalog: Writer) -> None:
    root = write_catalog(
        replace={
            PAY_FILE: ("amount: {type: double", "amount: {type: float"),
            HOURLY_FILE: ("grain: hour", "grain: weekly"),
        }
    )
    with pytest.raises(CatalogValidationError) as caught:
        load_catalog(root)
    problems = caught.value.problems
    assert len(problems) >= 2
    assert "2 problems" in str(caught.value) or f"{len(problems)} problems" in str(caught.value)
    by_file = {p.file.split("/")[-1]: p for p in problems}
    assert by_file["pay.yaml"].line == 9 and by_file["pay.yaml"].where == "fields.amount"
    assert by_file["shop_hourly.yaml"].line == 3


def test_a_broken_topic_file_does_not_cascade_into_missing_producers(write_catalog: Writer) -> None:
    root = write_catalog(replace={PAY_FILE: ("  ts: timestamp-ms", "  ts: long")})
    with pytest.raises(CatalogValidationError) as caught:
        load_catalog(root)
    assert "no producer" not in str(caught.value)
    assert len(caught.value.problems) == 1


def test_missing_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="does not exist"):
        load_catalog(tmp_path / "nope")

"""What the catalog generates: ClickHouse DDL, Delta/Spark schema descriptions, HBase columns, offline SQL."""

from __future__ import annotations

from pathlib import Path

import pytest
from catalog_samples import Writer

from widehouse.catalog import Catalog, load_catalog
from widehouse.catalog.offline import day_parameter, render_offline_sql
from widehouse.catalog.schema import final_columns, hbase_columns, partial_columns, schema_ddl
from widehouse.clickhouse import ddl
from widehouse.errors import CatalogError


@pytest.fixture
def catalog(write_catalog: Writer) -> Catalog:
    return load_catalog(write_catalog())


def test_partial_table_ddl(catalog: Catalog) -> None:
    statement = ddl.partial_table_ddl(catalog.table("shop_hourly"), "wh")
    assert statement == (
        "CREATE TABLE IF NOT EXISTS `wh`.`shop_hourly_partial`\n(\n"
        "    `uid` Int64,\n"
        "    `hour` DateTime('UTC'),\n"
        "    `orders` SimpleAggregateFunction(sum, UInt64) DEFAULT 0,\n"
        "    `spent` SimpleAggregateFunction(sum, Nullable(Float64)),\n"
        "    `last_city` SimpleAggregateFunction(max, Tuple(ts DateTime64(3, 'UTC'), v String)) "
        "DEFAULT (toDateTime64(0, 3, 'UTC'), ''),\n"
        "    `big_orders` SimpleAggregateFunction(sum, UInt64) DEFAULT 0\n"
        ")\n"
        "ENGINE = AggregatingMergeTree\n"
        "PARTITION BY toYYYYMMDD(`hour`)\n"
        "ORDER BY (`uid`, `hour`)\n"
        "SETTINGS non_replicated_deduplication_window = 10000"
    )


def test_merged_view_unwraps_pairs_and_groups_by_grain(catalog: Catalog) -> None:
    hourly = ddl.merged_view_ddl(catalog.table("shop_hourly"), "wh")
    assert "sum(p.`orders`) AS `orders`" in hourly
    assert (
        "if(tupleElement(max(p.`last_city`), 'ts') = toDateTime64(0, 3, 'UTC'), NULL, "
        "tupleElement(max(p.`last_city`), 'v')) AS `last_city`"
    ) in hourly
    assert hourly.endswith("GROUP BY p.`uid`, p.`hour`")
    daily = ddl.merged_view_ddl(catalog.table("shop_daily"), "wh")
    assert "toDate(p.`hour`) AS `day`" in daily and daily.endswith("GROUP BY p.`uid`, toDate(p.`hour`)")


def test_final_tables_and_analyst_view(catalog: Catalog) -> None:
    final = ddl.final_table_ddl(catalog.table("shop_daily"), "wh")
    assert "`day` Date" in final and "`orders` UInt64" in final and "`spent` Nullable(Float64)" in final
    assert "`pay_orders` Nullable(Int64)" in final and "`pay_usd` Nullable(Float64)" in final
    # every publish is a version of its period; the ledger names the visible one
    assert "ENGINE = ReplacingMergeTree\n" in final and "ORDER BY (`uid`, `day`, `finalized_at`)" in final
    view = ddl.analyst_view_ddl(catalog.table("shop_daily"), "wh")
    assert "CAST(NULL AS Nullable(Int64)) AS `pay_orders`" in view
    assert (
        "FROM `wh`.`shop_daily_final`\nWHERE (`day`, `finalized_at`) IN\n"
        "    (SELECT toDate(`period`), max(`finalized_at`) FROM `wh`.`finalized_periods` "
        "WHERE `table` = 'shop_daily' GROUP BY `period`)"
    ) in view
    assert (
        "FROM `wh`.`shop_daily_merged`\n"
        "WHERE `day` NOT IN (SELECT toDate(`period`) FROM `wh`.`finalized_periods` "
        "WHERE `table` = 'shop_daily')"
    ) in view
    hourly = ddl.analyst_view_ddl(catalog.table("shop_hourly"), "wh")
    assert "(SELECT toDateTime(`period`, 'UTC'), max(`finalized_at`)" in hourly


def test_ddl_is_deterministic_and_the_database_is_validated(catalog: Catalog, write_catalog: Writer) -> None:
    again = load_catalog(write_catalog())
    assert ddl.catalog_ddl(catalog, "wh") == ddl.catalog_ddl(again, "wh")
    assert "`other_db`.`shop_hourly_partial`" in ddl.catalog_ddl(catalog, "other_db")["shop_hourly"][0]
    with pytest.raises(CatalogError, match="not a plain identifier"):
        ddl.catalog_ddl(catalog, "wh`; DROP DATABASE x; --")


def test_partial_types_per_aggregate(write_catalog: Writer) -> None:
    catalog = load_catalog(
        write_catalog(
            replace={
                "schemas/tables/shop_hourly.yaml": (
                    "  - big_orders\n",
                    "  - big_orders\n  - first_ts\n  - min_price\n",
                ),
                "schemas/topics/acme/shop/pay.yaml": (
                    "  shop_daily:",
                    "    first_ts: first(ts)\n    min_price: min(item.price)\n  shop_daily:",
                ),
            }
        )
    )
    table = catalog.table("shop_hourly")
    kinds = {c.name: ddl.partial_type(c) for c in table.columns}
    assert kinds["first_ts"] == (
        "SimpleAggregateFunction(min, Tuple(ts DateTime64(3, 'UTC'), v DateTime64(3, 'UTC')))"
    )
    assert kinds["min_price"] == "SimpleAggregateFunction(min, Nullable(Int64))"
    assert ddl.partial_default(table.column("first_ts")) == (
        "(toDateTime64('2299-12-31 23:59:59.999', 3, 'UTC'), toDateTime64(0, 3, 'UTC'))"
    )
    spark = {c.name: c.spark_type for c in partial_columns(table)}
    assert spark["first_ts"] == "struct<ts:timestamp,v:timestamp>" and spark["orders"] == "bigint"
    assert {c.name: c.spark_type for c in final_columns(table)}["first_ts"] == "timestamp"


def test_delta_schemas_and_hbase_columns(catalog: Catalog) -> None:
    daily = catalog.table("shop_daily")
    assert schema_ddl(partial_columns(daily)) == (
        "`uid` bigint NOT NULL, `hour` timestamp NOT NULL, `orders` bigint NOT NULL, `spent` double"
    )
    assert schema_ddl(final_columns(daily)) == (
        "`uid` bigint NOT NULL, `day` date NOT NULL, `orders` bigint NOT NULL, `spent` double, "
        "`pay_orders` bigint, `pay_usd` double"
    )
    assert hbase_columns(daily) == {
        "orders": b"s:0[0]",
        "spent": b"s:0[1]",
        "pay_orders": b"h:0[0]",
        "pay_usd": b"h:0[1]",
    }


def test_offline_sql_is_rendered_with_a_validated_database(catalog: Catalog) -> None:
    source = catalog.table("shop_daily").offline[0]
    sql = render_offline_sql(source, "offline_db")
    assert "FROM `offline_db`.payments WHERE dt = :day" in sql
    with pytest.raises(CatalogError):
        render_offline_sql(source, "x; drop")
    assert day_parameter("2026-05-10") == {"day": "2026-05-10"}
    with pytest.raises(CatalogError):
        day_parameter("2026-05-10' OR '1'='1")


def test_topic_spark_ddl(catalog: Catalog) -> None:
    assert catalog.topic("persistent://acme/shop/pay").spark_ddl() == (
        "`uid` bigint, `ts` bigint, `amount` double, `city` string, "
        "`item` struct<`sku`:string,`price`:bigint>, `tags` array<string>, `attrs` map<string,bigint>"
    )


def test_relocation_keeps_the_origin_and_the_fingerprint_changes(catalog: Catalog) -> None:
    moved = catalog.relocated("t1")
    topic = moved.topic("persistent://acme-t1/shop/pay")
    assert topic.origin == "persistent://acme/shop/pay"
    assert not moved.has_topic("persistent://acme/shop/pay")
    assert moved.fingerprint != catalog.fingerprint
    assert catalog.fingerprint == load_catalog(catalog.root).fingerprint


def test_yaml_12_booleans_and_hints(catalog: Catalog) -> None:
    city = catalog.topic("persistent://acme/shop/pay").field("city")
    assert city.gen.values == ("yes", "no", "Paris")  # not True/False
    price = catalog.topic("persistent://acme/shop/pay").field("item.price")
    assert price.gen.values == (10, 2000)
    assert catalog.topic("persistent://acme/shop/pay").traffic.partitions == 3


def test_sql_dir_defaults_to_the_sibling_of_the_schemas_dir(catalog: Catalog) -> None:
    assert catalog.sql_dir == Path(catalog.root).parent / "sql"

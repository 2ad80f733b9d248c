"""The Flink SQL of ``bench flink_compare`` is generated from the catalog (BIGO's UNION ALL + GROUP BY).

Flink itself is not run here (it is an optional install, ``scripts/flink-setup``): these tests pin
the generated text for a small hand-written catalog, and the changelog folding the bench applies to
Flink's printed output.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench._flink_sql import PulsarEndpoint, hourly_query, job_statements, source_ddl, topic_select
from bench.flink_compare import fold_changelog
from widehouse.catalog import Catalog, load_catalog

FILES = {
    "catalog.yaml": """\
name: flink-sql-test
limits: {max_payload_bytes: 1000}
event_time: {lateness: 2h, max_future: 1m, max_age: 7d}
""",
    "tables/t_hourly.yaml": """\
wide_table: t_hourly
grain: hour
key: {name: uid, type: long}
columns: [visits, spent, cheapest, priciest, first_city, last_price]
""",
    "topics/acme/shop/pay.yaml": """\
topic: persistent://acme/shop/pay
key: uid
event_time: ts
fields:
  uid: long
  ts: timestamp-ms
  amount: double
  city: string
  paid: boolean
  item:
    type: object
    fields:
      sku: string
      price: long
columns:
  t_hourly:
    visits: count
    spent: sum(amount)
    cheapest: min(item.price)
    priciest: max(item.price)
    first_city: first(city)
    last_price: {agg: last, field: item.price, filter: "paid and city in ('Paris', 'Rome')"}
""",
    "topics/acme/shop/view.yaml": """\
topic: persistent://acme/shop/view
key: user_id
event_time: event_ms
fields:
  user_id: long
  event_ms: timestamp-ms
  page: string
columns:
  t_hourly:
    visits: {agg: count, filter: "page is not null"}
""",
}
PAY, VIEW = "persistent://acme/shop/pay", "persistent://acme/shop/view"


@pytest.fixture
def catalog(tmp_path: Path) -> Catalog:
    for name, text in FILES.items():
        path = tmp_path / "schemas" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return load_catalog(tmp_path / "schemas")


def test_the_query_is_a_union_of_one_select_per_topic_grouped_by_key_and_hour(catalog: Catalog) -> None:
    sql = hourly_query(catalog, "t_hourly", {PAY: "src_000", VIEW: "src_001"})
    assert sql.count("UNION ALL") == 1
    assert sql.count("FROM `src_000`") == 1 and sql.count("FROM `src_001`") == 1
    assert sql.endswith("GROUP BY `wh_key`, `wh_hour`")
    head = sql[: sql.index("FROM (")].splitlines()
    # hand-computed: counts sum to 0 when absent; first/last cut the value out of "<13-digit time><value>"
    assert head == [
        "SELECT",
        "  `wh_key`,",
        "  `wh_hour`,",
        "  COALESCE(SUM(`visits`), 0) AS `visits`,",
        "  SUM(`spent`) AS `spent`,",
        "  MIN(`cheapest`) AS `cheapest`,",
        "  MAX(`priciest`) AS `priciest`,",
        "  SUBSTR(MIN(`first_city`), 14) AS `first_city`,",
        "  CAST(SUBSTR(MAX(`last_price`), 14) AS BIGINT) AS `last_price`",
    ]


def test_each_branch_projects_its_topic_onto_every_column(catalog: Catalog) -> None:
    view = topic_select(catalog, "t_hourly", catalog.topic(VIEW), "src_001").splitlines()
    assert view == [
        "  SELECT",
        "    CAST(`user_id` AS BIGINT) AS `wh_key`,",
        "    `event_ms` - MOD(`event_ms`, 3600000) AS `wh_hour`,",
        "    CAST(CASE WHEN (`page` IS NOT NULL) THEN 1 ELSE 0 END AS BIGINT) AS `visits`,",
        "    CAST(NULL AS DOUBLE) AS `spent`,",
        "    CAST(NULL AS BIGINT) AS `cheapest`,",
        "    CAST(NULL AS BIGINT) AS `priciest`,",
        "    CAST(NULL AS STRING) AS `first_city`,",
        "    CAST(NULL AS STRING) AS `last_price`",
        "  FROM `src_001`",
        # the stream's rules: key and time present, time positive, at most 1 min ahead of the
        # publish time, at most 2 h behind it, payload at most 1000 bytes
        "  WHERE `user_id` IS NOT NULL AND `event_ms` IS NOT NULL AND `event_ms` > 0"
        " AND TO_TIMESTAMP_LTZ(`event_ms` - 60000, 3) <= `wh_publish_time`"
        " AND `wh_publish_time` <= TO_TIMESTAMP_LTZ(`event_ms` + 7200000, 3)"
        " AND `wh_message_size` <= 1000",
    ]
    pay = topic_select(catalog, "t_hourly", catalog.topic(PAY), "src_000")
    assert "    CAST(1 AS BIGINT) AS `visits`," in pay
    assert "    CAST(`amount` AS DOUBLE) AS `spent`," in pay
    assert "    CAST(`item`.`price` AS BIGINT) AS `cheapest`," in pay
    assert (
        "    CAST(CASE WHEN `city` IS NOT NULL THEN CONCAT(LPAD(CAST(`ts` AS STRING), 13, '0'), `city`) END"
        " AS STRING) AS `first_city`," in pay
    )
    assert (
        "    CAST(CASE WHEN ((`paid` IS TRUE) AND (`city` IN ('Paris', 'Rome')))"
        " AND `item`.`price` IS NOT NULL"
        " THEN CONCAT(LPAD(CAST(`ts` AS STRING), 13, '0'), CAST(`item`.`price` AS STRING)) END"
        " AS STRING) AS `last_price`" in pay
    )


def test_a_source_table_declares_the_payload_and_stops_at_the_latest_message(catalog: Catalog) -> None:
    ddl = source_ddl(catalog.topic(PAY), "src_000", PulsarEndpoint("pulsar://127.0.0.1:6650"), "sub1")
    assert "  `item` ROW<`sku` STRING, `price` BIGINT>,\n" in ddl
    assert "  `paid` BOOLEAN,\n" in ddl and "  `amount` DOUBLE,\n" in ddl
    assert "`wh_publish_time` TIMESTAMP_LTZ(3) METADATA FROM 'publish_time' VIRTUAL" in ddl
    for option in (
        "'topics' = 'persistent://acme/shop/pay'",
        "'source.subscription-name' = 'sub1'",
        "'source.subscription-type' = 'Exclusive'",
        "'source.start.message-id' = 'earliest'",
        "'source.stop.at-message-id' = 'latest'",
        "'pulsar.source.partitionDiscoveryIntervalMs' = '-1'",
    ):
        assert option in ddl
    assert "authParams" not in ddl
    secured = source_ddl(catalog.topic(PAY), "src_000", PulsarEndpoint("pulsar://h:6650", "tok"), "sub1")
    assert "'pulsar.client.authParams' = 'token:tok'" in secured


def test_the_job_is_a_table_per_topic_a_sink_and_one_insert(catalog: Catalog) -> None:
    statements = job_statements(catalog, "t_hourly", [PAY, VIEW], PulsarEndpoint("pulsar://x:6650"), "s")
    assert len(statements) == 4
    assert [s.split("(")[0] for s in statements[:3]] == [
        "CREATE TEMPORARY TABLE `src_000` ",
        "CREATE TEMPORARY TABLE `src_001` ",
        "CREATE TEMPORARY TABLE `wh_sink` ",
    ]
    insert = statements[3]
    assert insert.startswith(
        "INSERT INTO `wh_sink`\nSELECT JSON_OBJECT('wh_key' VALUE `wh_key`, 'wh_hour' VALUE"
    )
    assert "'last_price' VALUE `last_price` NULL ON NULL)" in insert


def test_the_demo_catalog_fans_out_to_every_topic_of_user_hourly() -> None:
    demo = load_catalog(Path(__file__).resolve().parents[3] / "schemas")
    topics = [str(t.name) for t in demo.topics_for("user_hourly")]
    statements = job_statements(demo, "user_hourly", topics, PulsarEndpoint("pulsar://x:6650"), "s")
    assert len(statements) == len(topics) + 2
    assert statements[-1].count("UNION ALL") == len(topics) - 1
    assert statements[-1].count(" AS `gifts_sent`") == len(topics) + 1  # a value per branch + the aggregate


def test_the_printed_changelog_folds_to_the_final_rows() -> None:
    lines = [
        "some log line",
        '1> +I[{"wh_key":7,"wh_hour":3600000,"visits":1}]',
        '2> +I[{"wh_key":8,"wh_hour":0,"visits":5}]',
        '1> -U[{"wh_key":7,"wh_hour":3600000,"visits":1}]',
        '1> +U[{"wh_key":7,"wh_hour":3600000,"visits":3}]',
        '2> -D[{"wh_key":8,"wh_hour":0,"visits":5}]',
        '+I[{"wh_key":9,"wh_hour":0,"visits":null}]',
    ]
    assert fold_changelog(lines, "wh_key", "wh_hour") == {
        (7, 3600000): {"visits": 3},
        (9, 0): {"visits": None},
    }

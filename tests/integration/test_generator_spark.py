"""Spark side of the catalog: topic schemas parse generated events, Delta schemas, offline Hive tables."""

from __future__ import annotations

import datetime as dt
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from widehouse.catalog import Accepted, Catalog, load_catalog, parse_event
from widehouse.generator import GenerateOptions, TrafficGenerator
from widehouse.settings import Settings

pytestmark = pytest.mark.spark
ROOT = Path(__file__).parents[2]
BASE = 1_778_400_000_000


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog(ROOT / "schemas")


def test_topic_schemas_parse_generated_events_like_the_reference(spark: Any, catalog: Catalog) -> None:
    from pyspark.sql import functions as sf

    from widehouse.catalog.spark import topic_schema

    generator = TrafficGenerator(
        catalog, GenerateOptions(count=4000, rate=0, seed=4, base_time_ms=BASE, users=30, bad_rate=0.02)
    )
    rows, expected = [], {}
    for chunk in generator.chunks():
        for j in range(len(chunk)):
            topic = generator.topics[chunk.topics[j]]
            result = parse_event(topic, chunk.payloads[j], BASE + chunk.offsets_ms[j], catalog.rules)
            if isinstance(result, Accepted):  # valid JSON of the right shape, on time or late
                index = len(rows)
                rows.append((index, topic.origin, chunk.payloads[j].decode()))
                expected[index] = result.row
    frame = spark.createDataFrame(rows, "id int, topic string, value string")
    parsed = frame.select(
        "id",
        "topic",
        *(
            sf.when(sf.col("topic") == t.origin, sf.from_json("value", topic_schema(t))).alias(f"t{i}")
            for i, t in enumerate(catalog.topics)
        ),
    )
    index = {t.origin: f"t{i}" for i, t in enumerate(catalog.topics)}
    seen = 0
    for row in parsed.collect():
        struct = row[index[row["topic"]]]
        assert struct is not None
        assert struct.asDict(recursive=True) == expected[row["id"]], row["topic"]
        seen += 1
    assert seen == len(expected) > 3500
    assert len(Counter(r[1] for r in rows)) >= 35  # most topics took part


def test_delta_accepts_the_partial_and_final_schemas(
    spark: Any, settings: Settings, catalog: Catalog
) -> None:
    from widehouse.catalog.spark import final_schema, partial_schema

    # the two richest shapes: hourly partials (pairs as structs) and daily finals (date, offline columns)
    for name, schema in (
        ("partials", partial_schema(catalog.table("user_hourly"))),
        ("final", final_schema(catalog.table("user_daily"))),
    ):
        path = settings.delta.path("it_schema", uuid.uuid4().hex[:8], name)
        spark.createDataFrame([], schema).write.format("delta").save(path)
        back = spark.read.format("delta").load(path).schema
        assert [(f.name, f.dataType) for f in back] == [(f.name, f.dataType) for f in schema]
    hourly = partial_schema(catalog.table("user_hourly"))
    assert hourly["last_country"].dataType.simpleString() == "struct<ts:timestamp,v:string>"
    assert not hourly["logins"].nullable


def test_generate_offline_builds_the_hive_tables_and_the_daily_sql_reads_them(
    spark: Any, catalog: Catalog
) -> None:
    from widehouse.catalog.spark import spark_type
    from widehouse.offline.spark import (
        OfflineSpec,
        generate_offline,
        offline_frame,
        payment_rows,
        profile_rows,
        social_rows,
    )

    database = f"it_offline_{uuid.uuid4().hex[:8]}"
    days = (dt.date(2026, 5, 9), dt.date(2026, 5, 10))
    spec = OfflineSpec(users=60, days=days, seed=3, database=database)
    try:
        # drawn by 3 tasks of 25, 25 and 10 users: as many rows as drawn in one go
        counts = generate_offline(spark, spec, catalog.sql_dir, users_per_task=25)
        assert counts["user_profile"] == 120 and counts["payments"] > 0 and counts["social_graph"] > 0
        assert counts["payments"] == sum(1 for _ in payment_rows(spec))
        assert counts["social_graph"] == sum(1 for _ in social_rows(spec))
        # re-running a day replaces that day's partitions only (same seed, same rows), 9 tasks of 7
        again = generate_offline(spark, OfflineSpec(60, days[1:], 3, database), catalog.sql_dir, 7)
        assert again["user_profile"] == 60
        per_table = spark.sql(
            " UNION ALL ".join(f"SELECT '{t}' AS t, count(*) AS n FROM {database}.{t}" for t in counts)
        ).collect()
        assert {r.t: r.n for r in per_table} == counts

        daily = catalog.table("user_daily")
        frame = offline_frame(spark, catalog, daily, "2026-05-10", database)
        types = {c.name: c.type for c in daily.offline_columns}
        spark_names = {
            "long": "bigint",
            "int": "int",
            "double": "double",
            "string": "string",
            "boolean": "boolean",
            "timestamp-ms": "timestamp",
        }
        assert frame.columns == ["uid", *types]
        for name, kind in types.items():
            assert frame.schema[name].dataType == spark_type(spark_names[kind]), name
        result = {r["uid"]: r.asDict() for r in frame.collect()}
        assert len(result) == 60

        # the aggregates equal what the generated rows say
        day = "2026-05-10"
        payments = [p for p in payment_rows(spec) if p[8] == day]
        orders = Counter(p[1] for p in payments)
        payer, n = orders.most_common(1)[0]
        assert result[payer]["pay_orders"] == n
        assert result[payer]["pay_success_orders"] == sum(
            1 for p in payments if p[1] == payer and p[7] == "success"
        )
        profile = {p[0]: p for p in profile_rows(spec) if p[10] == day}
        uid = 10_000_005
        assert result[uid]["country"] == profile[uid][2] and result[uid]["age"] == 2026 - profile[uid][5]
        follows = [e for e in social_rows(spec) if e[4] == day and e[2] == "follow"]
        assert result[uid]["followings"] == sum(1 for e in follows if e[0] == uid)
        assert result[uid]["followers"] == sum(1 for e in follows if e[1] == uid)
        assert sum(r["new_followers"] for r in result.values()) == sum(
            1 for e in follows if e[3].date() == dt.date(2026, 5, 10)
        )
    finally:
        spark.sql(f"DROP DATABASE IF EXISTS {database} CASCADE")


def test_generate_offline_through_hives_own_insert_too(spark: Any, catalog: Catalog) -> None:
    """Spark writes a partitioned Hive parquet table through its own file writer by default; with that
    conversion off (a user's conf, or a table format it does not convert) the insert is Hive's, which
    takes dynamic partitions only as the session's Hadoop conf allows (``spark_conf``)."""
    from widehouse.offline.spark import OfflineSpec, generate_offline

    database = f"it_offline_{uuid.uuid4().hex[:8]}"
    days = (dt.date(2026, 5, 9), dt.date(2026, 5, 10))
    key = "spark.sql.hive.convertInsertingPartitionedTable"
    before = spark.conf.get(key, "true")  # Spark's default
    spark.conf.set(key, "false")
    try:
        spec = OfflineSpec(users=20, days=days, seed=3, database=database)
        assert generate_offline(spark, spec, catalog.sql_dir, users_per_task=25)["user_profile"] == 40
        # a day again: that day's partition is replaced, the other stays
        again = generate_offline(spark, OfflineSpec(20, days[1:], 3, database), catalog.sql_dir, 7)
        assert again["user_profile"] == 20
        assert spark.sql(f"SELECT count(*) FROM {database}.user_profile").collect()[0][0] == 40
    finally:
        spark.conf.set(key, before)
        spark.sql(f"DROP DATABASE IF EXISTS {database} CASCADE")

"""Spark smoke check: Delta write / read / time travel and a Hive table, in one session."""

from __future__ import annotations

import uuid

from widehouse.errors import WidehouseError
from widehouse.settings import Settings
from widehouse.spark.session import build_session


def check_spark(settings: Settings) -> str:
    spark = build_session(settings, "widehouse-smoke")
    path = settings.delta.path("smoke", uuid.uuid4().hex[:8])
    spark.range(10).write.format("delta").save(path)
    spark.range(10, 25).write.format("delta").mode("append").save(path)
    now = spark.read.format("delta").load(path).count()
    then = spark.read.format("delta").option("versionAsOf", 0).load(path).count()
    if (now, then) != (25, 10):
        raise WidehouseError(f"delta: expected 25 rows now and 10 at version 0, got {now} and {then}")
    table = f"widehouse_smoke_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE TABLE {table} (uid STRING, amount DOUBLE) STORED AS PARQUET")
    try:
        spark.sql(f"INSERT INTO {table} VALUES ('u1', 1.5), ('u1', 2.5), ('u2', 4.0)")
        rows = spark.sql(f"SELECT uid, sum(amount) FROM {table} GROUP BY uid ORDER BY uid").collect()
        if [tuple(r) for r in rows] != [("u1", 4.0), ("u2", 4.0)]:
            raise WidehouseError(f"hive: unexpected aggregate {rows}")
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {table}")
    return f"delta time travel (v0=10, now=25 rows) at {path}; hive table created and queried"

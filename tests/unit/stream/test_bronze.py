"""The bronze tables' Arrow shapes and the rows the stream adds before a delta-rs append (pure)."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa

from widehouse.catalog import load_catalog
from widehouse.settings import DeltaSettings, load_settings
from widehouse.stream.bronze import bronze_tables, conform, local_uri, with_date, with_partials_meta

UTC = dt.UTC


def test_partial_rows_get_group_batch_date_and_hour() -> None:
    hours = [dt.datetime(2024, 5, 1, 23, tzinfo=UTC), dt.datetime(2024, 5, 2, 0, tzinfo=UTC)]
    data = pa.table({"uid": [7, 8], "hour": pa.array(hours, pa.timestamp("us", tz="UTC"))})
    out = with_partials_meta(data, "g001", 42)
    assert out.select(["wh_group", "wh_batch_id", "wh_date", "wh_hour"]).to_pylist() == [
        {"wh_group": "g001", "wh_batch_id": 42, "wh_date": dt.date(2024, 5, 1), "wh_hour": 23},
        {"wh_group": "g001", "wh_batch_id": 42, "wh_date": dt.date(2024, 5, 2), "wh_hour": 0},
    ]


def test_side_rows_are_dated_by_their_utc_day() -> None:
    at = dt.datetime(2024, 5, 1, 23, 59, 59, 999000, tzinfo=UTC)
    data = pa.table({"publish_time": pa.array([at], pa.timestamp("us", tz="UTC"))})
    assert with_date(data, "publish_time")["wh_date"].to_pylist() == [dt.date(2024, 5, 1)]


def test_conform_orders_casts_fills_and_reports_new_columns() -> None:
    schema = pa.schema([pa.field("a", pa.int64(), nullable=False), pa.field("b", pa.string())])
    data = pa.table({"new": [1.5], "a": pa.array([3], pa.int32())})
    out, new = conform(data, schema)
    assert new is True
    assert out.column_names == ["a", "b", "new"]
    assert out.to_pylist() == [{"a": 3, "b": None, "new": 1.5}]
    assert out.schema.field("a").type == pa.int64()
    _, none_new = conform(pa.table({"a": [1], "b": ["x"]}), schema)
    assert none_new is False


def test_bronze_tables_of_a_group_and_their_partitions() -> None:
    catalog = load_catalog(load_settings().schemas_dir)
    tables = bronze_tables(catalog, DeltaSettings("/lake"), ("user_hourly",))
    assert set(tables) == {"user_hourly", "quarantine", "late_events", "stream_progress"}
    assert tables["user_hourly"].path == "/lake/bronze/user_hourly_partials"
    assert tables["user_hourly"].partition_by == ("wh_date", "wh_hour")
    assert tables["quarantine"].partition_by == ("wh_date",)
    partial = tables["user_hourly"].schema
    assert partial.names[:2] == ["uid", "hour"]
    assert partial.names[-4:] == ["wh_group", "wh_batch_id", "wh_date", "wh_hour"]
    assert not partial.field("uid").nullable
    assert partial.field("hour").type == pa.timestamp("us", tz="UTC")


def test_delta_rs_names_of_table_paths() -> None:
    assert local_uri("file:///lake/t") == "/lake/t"
    assert local_uri("file:/lake/t") == "/lake/t"
    assert local_uri("s3a://bucket/lake/t") == "s3://bucket/lake/t"
    assert local_uri("/lake/t") == "/lake/t"

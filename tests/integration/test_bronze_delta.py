"""The stream's bronze Delta tables through delta-rs: Spark and delta-rs read identical rows,
replays are skipped, tables delta-spark created stay appendable, delta-rs checkpoints them."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from widehouse.catalog import load_catalog
from widehouse.contracts.tables import QUARANTINE, QUARANTINE_SHAPE
from widehouse.settings import DeltaSettings, Settings
from widehouse.stream.bronze import BronzeWriter, bronze_tables, with_date, with_partials_meta

pytestmark = [pytest.mark.integration, pytest.mark.spark]

UTC = dt.UTC
H13 = dt.datetime(2024, 5, 1, 13, tzinfo=UTC)
H14 = dt.datetime(2024, 5, 1, 14, tzinfo=UTC)


def _partials(settings: Settings, uids: list[int], hours: list[dt.datetime], logins: list[int]) -> pa.Table:
    """Hand-written partial rows of user_hourly: every count 0 except ``logins``; a 'last' pair."""
    table = load_catalog(settings.schemas_dir).table("user_hourly")
    n = len(uids)
    columns: dict[str, Any] = {
        "uid": pa.array(uids, pa.int64()),
        "hour": pa.array(hours, pa.timestamp("us", "UTC")),
    }
    for column in table.columns:
        if column.agg == "count":
            columns[column.name] = pa.array(logins if column.name == "logins" else [0] * n, pa.int64())
    pair = pa.struct([pa.field("ts", pa.timestamp("us", "UTC")), pa.field("v", pa.string())])
    columns["last_country"] = pa.array(
        [{"ts": h, "v": f"c{u}"} for u, h in zip(uids, hours, strict=True)], pair
    )
    return pa.table(columns)


def _spark_rows(spark: Any, path: str, columns: list[str]) -> list[tuple[Any, ...]]:
    frame = spark.read.format("delta").load(path).select(*columns).orderBy(*columns)
    return [tuple(r) for r in frame.collect()]


def _rs_rows(path: str, columns: list[str]) -> list[tuple[Any, ...]]:
    from deltalake import DeltaTable

    table = pa.table(DeltaTable(path).to_pyarrow_table(columns=columns))
    return sorted(tuple(r[c] for c in columns) for r in table.to_pylist())


def test_spark_and_delta_rs_read_identical_rows_and_replays_are_skipped(
    settings: Settings, spark: Any, tmp_path: Path
) -> None:
    delta = DeltaSettings(str(tmp_path / "lake"))
    catalog = load_catalog(settings.schemas_dir)
    tables = bronze_tables(catalog, delta, ("user_hourly",))
    writer = BronzeWriter()
    for table in tables.values():
        writer.ensure(table)
    partials = tables["user_hourly"]
    app_id = "app:g001:user_hourly"
    batch0 = _partials(settings, [1, 2], [H13, H13], [3, 1])
    batch1 = _partials(settings, [1], [H14], [5])
    assert writer.append(partials, with_partials_meta(batch0, "g001", 0), app_id, 0) is True
    assert writer.append(partials, with_partials_meta(batch1, "g001", 1), app_id, 1) is True
    assert writer.append(partials, with_partials_meta(batch0, "g001", 0), app_id, 0) is False  # replay
    assert writer.append(partials, with_partials_meta(batch1, "g001", 1), app_id, 1) is False
    assert writer.version(partials.path, app_id) == 1

    columns = ["uid", "hour", "logins", "wh_group", "wh_batch_id", "wh_date", "wh_hour"]
    expected = [
        (1, H13, 3, "g001", 0, dt.date(2024, 5, 1), 13),
        (1, H14, 5, "g001", 1, dt.date(2024, 5, 1), 14),
        (2, H13, 1, "g001", 0, dt.date(2024, 5, 1), 13),
    ]
    assert _rs_rows(partials.path, columns) == expected
    # Spark returns session-local naive datetimes; the test session runs in UTC
    spark_rows = [
        (u, h.replace(tzinfo=UTC), *rest) for u, h, *rest in _spark_rows(spark, partials.path, columns)
    ]
    assert spark_rows == expected
    pairs = spark.read.format("delta").load(partials.path).where("uid = 2").select("last_country.v").first()
    assert pairs[0] == "c2"
    # partition pruning works on the delta-rs partition values
    assert spark.read.format("delta").load(partials.path).where("wh_hour = 14").count() == 1


def test_a_table_delta_spark_created_is_appendable_and_checkpointed(
    settings: Settings, spark: Any, tmp_path: Path
) -> None:
    from deltalake import DeltaTable

    from widehouse.stream.spark.delta_tables import side_table_schema

    path = str(tmp_path / "lake" / "bronze" / QUARANTINE)
    (
        spark.createDataFrame([], side_table_schema(QUARANTINE))
        .write.format("delta")
        .partitionBy("wh_date")
        .option("delta.checkpointInterval", "3")
        .save(path)
    )
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.checkpointInterval' = '3')")
    assert DeltaTable(path).protocol().min_writer_version == 2
    table = bronze_tables(load_catalog(settings.schemas_dir), DeltaSettings(str(tmp_path / "lake")), ())[
        QUARANTINE
    ]
    writer = BronzeWriter()
    writer.ensure(table)
    at = dt.datetime(2024, 5, 1, 23, 59, tzinfo=UTC)
    for batch in range(7):
        rows = pa.Table.from_pylist(
            [
                {"app": "a", "group": "g", "batch_id": batch, "topic": "persistent://t/n/x",
                 "message_id": f"1:{batch}:0", "publish_time": at, "reason": "malformed_json", "detail": "",
                 "payload": b"{x", "payload_bytes": 2},
            ],
            schema=QUARANTINE_SHAPE.arrow_schema(),
        )  # fmt: skip
        assert writer.append(table, with_date(rows, "publish_time"), "a:g:quarantine", batch)
    assert list((Path(path) / "_delta_log").glob("*.checkpoint.parquet")), "delta-rs wrote no checkpoint"
    ids = [
        r[0] for r in spark.read.format("delta").load(path).select("message_id").orderBy("batch_id").collect()
    ]
    assert ids == [f"1:{b}:0" for b in range(7)]
    assert spark.read.format("delta").load(path).where("wh_date = '2024-05-01'").count() == 7

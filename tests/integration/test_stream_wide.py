"""The streaming wide-table job end to end against real Pulsar, the ClickHouse engine and Delta.

Every test publishes generated traffic (bad input and late events included), runs the job as a
subprocess exactly as a user would, and compares what ClickHouse and Delta hold with the
generator's manifest, for every key and hour (and day).
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.stream_support import Deployment, expected
from tests.support import copy_catalog
from widehouse.generator.manifest import diff_rows
from widehouse.settings import Settings

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow, pytest.mark.e2e]


def test_manifest_equals_clickhouse_equals_delta(services: Settings, spark: Any, tmp_path: Path) -> None:
    deployment = Deployment(tmp_path, extra_env={"WIDEHOUSE_STREAM_MAX_MESSAGES": "2500"})
    manifest = deployment.publish(6000, seed=11)
    groups = deployment.plan_groups(2)
    assert len(groups) == 2

    run = deployment.stream()
    assert run.returncode == 0, run.stdout[-5000:]

    deployment.assert_sinks_match(spark, expected(manifest))

    # bad and late messages are accounted for, per class, in both sinks
    counts = manifest.counts()
    reasons = {
        r["reason"]: r["n"]
        for r in deployment.clickhouse("SELECT reason, count() AS n FROM quarantine GROUP BY reason")
    }
    assert reasons == counts.by_reason
    assert deployment.clickhouse("SELECT count() AS n FROM late_events")[0]["n"] == counts.late
    delta = deployment.settings.delta
    assert spark.read.format("delta").load(delta.path("bronze", "quarantine")).count() == counts.quarantined
    assert spark.read.format("delta").load(delta.path("bronze", "late_events")).count() == counts.late

    # progress: every message counted once, per topic; the group's watermark advanced
    progress = deployment.clickhouse(
        "SELECT topic, sum(rows_in) AS rows_in, sum(rows_out) AS rows_out, sum(bad) AS bad, "
        "sum(late) AS late FROM stream_progress FINAL WHERE topic != '*' GROUP BY topic"
    )
    assert sum(p["rows_in"] for p in progress) == counts.sent
    assert sum(p["rows_out"] for p in progress) == counts.wide
    assert sum(p["bad"] for p in progress) == counts.quarantined
    for row in progress:
        catalog_name = row["topic"].replace(f"-{deployment.suffix}/", "/", 1)
        assert row["rows_in"] == manifest.counts(catalog_name).sent, row["topic"]
    marks = deployment.clickhouse(
        "SELECT group, max(watermark) AS wm, max(batch_id) AS batches, argMax(lag, batch_id) AS lag "
        "FROM stream_progress FINAL WHERE topic = '*' GROUP BY group"
    )
    assert {m["group"] for m in marks} == {"g001", "g002"}
    assert all(m["lag"] == 0 for m in marks), marks  # drained
    assert max(m["batches"] for m in marks) >= 1, marks  # admission control cut several batches
    assert all(m["wm"] > (time.time() - 600) * 1000 for m in marks)

    # the two groups wrote partial rows of the same keys and hours, merged by both sinks
    both = spark.read.format("delta").load(delta.path("bronze", "user_hourly_partials"))
    from pyspark.sql.functions import countDistinct

    shared = both.groupBy("uid", "hour").agg(countDistinct("wh_group").alias("groups")).where("groups = 2")
    assert shared.count() > 0


def test_exactly_once_across_kills_and_a_failed_insert(
    services: Settings, spark: Any, tmp_path: Path
) -> None:
    """SIGKILL the app before, during and after the sinks of different batches, and fail a ClickHouse
    insert once mid-batch; after the restarts the sinks still equal the manifest exactly. The bronze
    upkeep compacts every partition of two files or more twice a second meanwhile (kills included)."""
    upkeep = {"WIDEHOUSE_DELTA_BRONZE_UPKEEP_SECONDS": "0.5", "WIDEHOUSE_DELTA_BRONZE_COMPACT_FILES": "2"}
    deployment = Deployment(tmp_path, extra_env={"WIDEHOUSE_STREAM_MAX_MESSAGES": "800", **upkeep})
    manifest = deployment.publish(5000, seed=12)
    deployment.plan_groups(1)

    runs = [
        # a ClickHouse insert fails mid-batch (one table written, the others not): the query restarts
        # in-process from its checkpoint and replays the batch; then a kill after ClickHouse
        (["--fault", "clickhouse-insert@0:raise", "--fault", "after-clickhouse@1:kill"], -signal.SIGKILL),
        (["--fault", "clickhouse-insert@2:kill"], -signal.SIGKILL),
        (["--fault", "after-delta@3:kill"], -signal.SIGKILL),
        (["--fault", "after-sinks@4:kill"], -signal.SIGKILL),
        (["--fault", "before-sinks@5:kill"], -signal.SIGKILL),
        ([], 0),
    ]
    for args, code in runs:
        run = deployment.stream(*args)
        assert run.returncode == code, f"{args}: exit {run.returncode}\n{run.stdout[-5000:]}"
    assert len(deployment.committed_batches("g001")) >= 7

    deployment.assert_sinks_match(spark, expected(manifest))
    counts = manifest.counts()
    assert deployment.clickhouse("SELECT count() AS n FROM quarantine")[0]["n"] == counts.quarantined
    assert deployment.clickhouse("SELECT count() AS n FROM late_events")[0]["n"] == counts.late
    delta = deployment.settings.delta
    assert spark.read.format("delta").load(delta.path("bronze", "quarantine")).count() == counts.quarantined
    from deltalake import DeltaTable

    history = DeltaTable(delta.path("bronze", "user_hourly_partials")).history()
    assert "OPTIMIZE" in {h["operation"] for h in history}  # the rows above went through compactions


def test_sigterm_stops_cleanly_and_the_next_run_completes(
    services: Settings, spark: Any, tmp_path: Path
) -> None:
    deployment = Deployment(tmp_path, extra_env={"WIDEHOUSE_STREAM_MAX_MESSAGES": "600"})
    manifest = deployment.publish(6000, seed=13)
    deployment.plan_groups(1)

    process = deployment.start_stream()
    deadline = time.monotonic() + 300
    while len(deployment.committed_batches("g001")) < 2 and time.monotonic() < deadline:
        assert process.poll() is None, "the stream exited on its own"
        time.sleep(1)
    assert len(deployment.committed_batches("g001")) >= 2
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=120) == 0
    done = deployment.committed_batches("g001")

    run = deployment.stream()
    assert run.returncode == 0, run.stdout[-5000:]
    assert len(done) < 10, "the stop came too late to test anything"
    assert len(deployment.committed_batches("g001")) > len(done)
    deployment.assert_sinks_match(spark, expected(manifest))


def test_a_new_optional_field_becomes_a_new_column_after_restart(
    services: Settings, spark: Any, tmp_path: Path
) -> None:
    schemas = copy_catalog(tmp_path)
    deployment = Deployment(tmp_path, schemas_dir=schemas)
    login = "login"
    first = deployment.publish(1500, seed=14, topics=f".*/{login}$")
    deployment.plan_groups(1, topics=[str(deployment.catalog.topic(_name(deployment, login)).name)])
    assert deployment.stream().returncode == 0

    # the catalog gains an optional field on the login topic and a column fed by it
    topic_file = next(schemas.glob(f"topics/**/{login}.yaml"))
    doc = yaml.safe_load(topic_file.read_text())
    doc["fields"]["login_attempts"] = {
        "type": "long",
        "description": "attempts before this one",
        "range": [0, 5],
    }
    doc["columns"]["user_hourly"]["login_attempts_sum"] = {"agg": "sum", "field": "login_attempts"}
    topic_file.write_text(yaml.safe_dump(doc, sort_keys=False))
    table_file = schemas / "tables" / "user_hourly.yaml"
    table_doc = yaml.safe_load(table_file.read_text())
    table_doc["columns"].append({"name": "login_attempts_sum", "description": "sum of login attempts"})
    table_file.write_text(yaml.safe_dump(table_doc, sort_keys=False))

    second = deployment.publish(1500, seed=15, topics=f".*/{login}$")
    run = deployment.stream()
    assert run.returncode == 0, run.stdout[-5000:]

    clickhouse_rows = deployment.clickhouse_rows("user_hourly")
    delta_rows = deployment.delta_rows(spark, "user_hourly")
    # the new column holds exactly what the events that carried the field contributed
    new_values = {k: v["login_attempts_sum"] for k, v in second.expected_rows("user_hourly").items()}
    for rows in (clickhouse_rows, delta_rows):
        got = {k: {"login_attempts_sum": v["login_attempts_sum"]} for k, v in rows.items()}
        want = {k: {"login_attempts_sum": new_values.get(k)} for k in _normalized(got)}
        assert diff_rows(want, got) == []
    # nothing accepted before the change was lost: counts add up across both runs
    for rows in (clickhouse_rows, delta_rows):
        for column in ("logins", "login_failures"):
            total = sum(r[column] for r in rows.values())
            want = _column_total(first, column) + _column_total(second, column)
            assert total == want, column


def _name(deployment: Deployment, local: str) -> str:
    return next(str(t.name) for t in deployment.catalog.topics if t.name.local == local)


def _normalized(rows: dict[tuple[Any, Any], Any]) -> list[tuple[Any, int]]:
    from widehouse.generator.manifest import normalize

    return [(normalize(k), normalize(p)) for k, p in rows]


def _column_total(manifest: Any, column: str) -> int:
    return sum(row[column] or 0 for row in manifest.expected_rows("user_hourly").values())

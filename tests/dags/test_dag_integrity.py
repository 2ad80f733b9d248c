"""Every DAG file imports cleanly, fast, without pyspark or Connections, with owner, retries, tags
and docs; the hourly DAG fans out one task pair per hourly table of the catalog."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.support import copy_catalog, json_of_python
from widehouse.catalog import load_catalog
from widehouse.orchestration.dagdefaults import OWNER, TAGS

ROOT = Path(__file__).parents[2]
DAGS = ROOT / "dags"


def probe(schemas_dir: Path | None = None) -> dict[str, Any]:
    env = {**os.environ}
    if schemas_dir is not None:
        env["WIDEHOUSE_SCHEMAS_DIR"] = str(schemas_dir)
    return dict(json_of_python(["-m", "tests.dags.dag_probe", str(DAGS)], env))


@pytest.fixture(scope="module")
def bag() -> dict[str, Any]:
    return probe()


def test_every_file_imports_without_errors(bag: dict[str, Any]) -> None:
    assert bag["errors"] == {}
    files = {Path(f).name for f in bag["files"]}
    assert files == {p.name for p in DAGS.glob("*.py")}


def test_every_file_parses_well_under_a_second(bag: dict[str, Any]) -> None:
    # per file, with the imports every parsing process pays once (Airflow's standard provider, the
    # widehouse catalog modules, ~0.4 s cold) done beforehand; ~0.15 s each on a quiet 2-core box,
    # the bound leaves room for a box shared by several engineers (load 15+)
    slow = {f: s for f, s in bag["files"].items() if s >= 1.0}
    assert slow == {}, slow


def test_no_pyspark_and_no_connection_or_variable_lookups_at_parse_time(bag: dict[str, Any]) -> None:
    assert bag["pyspark"] == []
    assert bag["lookups"] == []


def test_the_expected_dags(bag: dict[str, Any]) -> None:
    assert set(bag["dags"]) == {
        "widehouse_streams",
        "widehouse_hourly",
        "widehouse_hourly_events",
        "widehouse_daily",
        "widehouse_replan",
        "widehouse_refinalize",
        "widehouse_rebuild_day",
        "widehouse_replan_now",
        "widehouse_retire_app",
        "widehouse_repair",
    }


def test_owner_retries_tags_and_docs(bag: dict[str, Any]) -> None:
    for dag_id, dag in bag["dags"].items():
        assert dag["owners"] == [OWNER], dag_id
        assert all(isinstance(r, int) and r >= 0 for r in dag["retries"]), dag_id
        assert dag["tags"] and set(dag["tags"]) <= TAGS, (dag_id, dag["tags"])
        doc = dag["doc_md"]
        assert doc.startswith("# ") and "Waits for" in doc and "Re-run" in doc, dag_id


def test_scheduled_dags_and_their_shapes(bag: dict[str, Any]) -> None:
    dags = bag["dags"]
    assert dags["widehouse_hourly"]["catchup"] is True
    assert dags["widehouse_hourly"]["sensor_modes"] == ["reschedule"]
    assert dags["widehouse_daily"]["sensor_modes"] == ["reschedule"]
    assert dags["widehouse_streams"]["catchup"] is False
    assert dags["widehouse_refinalize"]["params"] == sorted(
        ["table", "first_hour", "last_hour", "include_late", "accept_mismatch", "force"]
    )
    assert dags["widehouse_repair"]["params"] == sorted(
        ["table", "first_hour", "last_hour", "topics", "reasons", "republish"]
    )


def test_hourly_fans_out_one_task_pair_per_hourly_table(bag: dict[str, Any]) -> None:
    hourly = [t.name for t in load_catalog(ROOT / "schemas").wide_tables if t.grain == "hour"]
    tasks = bag["dags"]["widehouse_hourly"]["tasks"]
    assert tasks == sorted([f"wait_{t}" for t in hourly] + [f"finalize_{t}" for t in hourly])
    assert bag["dags"]["widehouse_hourly"]["outlets"] == sorted(f"widehouse://final/{t}" for t in hourly)
    # one finalize of a table at a time: concurrent hours raced to create silver Delta, and Spark
    # processes share the local embedded Derby metastore (seen in tests/e2e/test_airflow_hourly.py)
    assert bag["dags"]["widehouse_hourly"]["one_at_a_time"] == sorted(f"finalize_{t}" for t in hourly)


def test_the_event_driven_hourly_dag_watches_one_asset_per_hourly_table(bag: dict[str, Any]) -> None:
    hourly = [t.name for t in load_catalog(ROOT / "schemas").wide_tables if t.grain == "hour"]
    dag = bag["dags"]["widehouse_hourly_events"]
    assert dag["tasks"] == sorted(f"finalize_{t}" for t in hourly)
    assert dag["outlets"] == sorted(f"widehouse://final/{t}" for t in hourly)
    assert dag["catchup"] is False and dag["sensor_modes"] == []


def test_a_new_hourly_table_in_the_catalog_adds_its_tasks(tmp_path: Path) -> None:
    schemas = copy_catalog(tmp_path)
    (schemas / "tables" / "crash_hourly.yaml").write_text(
        "wide_table: crash_hourly\n"
        'description: "Crashes per user per hour."\n'
        "grain: hour\n"
        'key: {name: uid, type: long, description: "BIGO account id"}\n'
        "columns:\n"
        '  - {name: crashes, description: "crashes and ANRs"}\n'
    )
    topic = schemas / "topics" / "bigolive" / "app" / "app_crash.yaml"
    topic.write_text(
        topic.read_text().replace("columns:\n", "columns:\n  crash_hourly:\n    crashes: count\n", 1)
    )
    assert {t.name for t in load_catalog(schemas).wide_tables} >= {"crash_hourly", "user_hourly"}
    dags = probe(schemas)["dags"]
    assert "wait_crash_hourly" in dags["widehouse_hourly"]["tasks"]
    assert "finalize_crash_hourly" in dags["widehouse_hourly"]["tasks"]
    assert len(dags["widehouse_hourly"]["tasks"]) == 4

"""Connections -> WIDEHOUSE_* overlay, the cluster submit command, the trigger-form fields."""

from __future__ import annotations

import json
from pathlib import Path

from widehouse.catalog import load_catalog
from widehouse.clickhouse.client import database_name
from widehouse.orchestration import params
from widehouse.orchestration.connections import ConnectionFields, overlay_from
from widehouse.orchestration.launch import submit_command, write_snapshot
from widehouse.planner import Group, Plan, load_plan
from widehouse.settings import load_settings

ROOT = Path(__file__).parents[3]


def test_connections_become_widehouse_variables_and_secrets_to_mask() -> None:
    overlay = overlay_from(
        {
            "widehouse_clickhouse": ConnectionFields(
                "widehouse_clickhouse", "ch.prod", 8443, "wh", "p@ss word", "analytics", {"secure": True}
            ),
            "widehouse_pulsar": ConnectionFields(
                "widehouse_pulsar",
                "pulsar.prod",
                6651,
                password="tok",
                extra={"admin_url": "https://p:8443", "tls": True},
            ),
            "widehouse_hbase": ConnectionFields("widehouse_hbase", "thrift.prod", 9091),
        }
    )
    dsn = "https://wh:p%40ss%20word@ch.prod:8443/analytics"
    assert overlay.env == {
        "WIDEHOUSE_CLICKHOUSE_DSN": dsn,
        "WIDEHOUSE_PULSAR_SERVICE_URL": "pulsar+ssl://pulsar.prod:6651",
        "WIDEHOUSE_PULSAR_ADMIN_URL": "https://p:8443",
        "WIDEHOUSE_PULSAR_AUTH_TOKEN": "tok",
        "WIDEHOUSE_HBASE_HOST": "thrift.prod",
        "WIDEHOUSE_HBASE_PORT": "9091",
    }
    assert {"p@ss word", "p%40ss%20word", dsn, "tok"} <= set(overlay.secrets)
    settings = load_settings({"WIDEHOUSE_STATE_DIR": "/srv/s", **overlay.env})
    assert database_name(settings.clickhouse) == "analytics" and "p%40ss" not in repr(settings)


def test_undefined_connections_change_nothing() -> None:
    assert overlay_from({}).env == {}


def test_the_committed_dev_connections_match_the_local_defaults() -> None:
    body = json.loads((ROOT / "docker" / "airflow" / "dev-connections.json").read_text())
    fields = {
        k: ConnectionFields(
            k,
            v.get("host"),
            v.get("port"),
            v.get("login"),
            v.get("password"),
            v.get("schema"),
            v.get("extra", {}),
        )
        for k, v in body.items()
    }
    local = load_settings({"WIDEHOUSE_STATE_DIR": "/srv/s"})
    via = load_settings({"WIDEHOUSE_STATE_DIR": "/srv/s", **overlay_from(fields).env})
    assert via.clickhouse.dsn == local.clickhouse.dsn
    assert (via.pulsar.service_url, via.pulsar.admin_url) == (
        local.pulsar.service_url,
        local.pulsar.admin_url,
    )
    assert (via.hbase.host, via.hbase.port) == (local.hbase.host, local.hbase.port)


def test_cluster_submit_command() -> None:
    settings = load_settings(
        {
            "WIDEHOUSE_STATE_DIR": "/srv/s",
            "WIDEHOUSE_SPARK_MASTER": "yarn",
            "WIDEHOUSE_SPARK_JARS": "/j/delta.jar",
            "WIDEHOUSE_SPARK_CONF": "spark.executor.cores=2",
            "WIDEHOUSE_SPARK_SUBMIT": "/opt/spark/bin/spark-submit",
            "WIDEHOUSE_STREAM_APP": "whprod",
            "WIDEHOUSE_SUPERVISOR_MODE": "cluster",
        }
    )
    assert submit_command(settings, "g007", "hdfs:///wh/plan.json", "hdfs:///wh/stream_wide.py") == [
        "/opt/spark/bin/spark-submit",
        "--master", "yarn",
        "--deploy-mode", "cluster",
        "--name", "widehouse-whprod-g007",
        "--conf", "spark.yarn.submit.waitAppCompletion=false",
        "--conf", "spark.standalone.submit.waitAppCompletion=false",
        "--conf", "spark.kubernetes.submission.waitAppCompletion=false",
        "--conf", "spark.driver.memory=2g",
        "--jars", "/j/delta.jar",
        "--conf", "spark.executor.cores=2",
        "hdfs:///wh/stream_wide.py", "--plan", "hdfs:///wh/plan.json", "--group", "g007",
    ]  # fmt: skip


def test_the_snapshot_plan_holds_only_the_group(tmp_path: Path) -> None:
    plan = Plan(
        groups=(
            Group("g001", ("persistent://t/n/a",), 1.0, 1, False),
            Group("g002", ("persistent://t/n/b",), 2.0, 1, False),
        ),
        partitions={"persistent://t/n/a": 1, "persistent://t/n/b": 3},
    )
    snap = load_plan(write_snapshot(plan, "g002", tmp_path / "plan.json"))
    assert [g.name for g in snap.groups] == ["g002"] and dict(snap.partitions) == {"persistent://t/n/b": 3}


def test_trigger_form_fields_follow_the_catalog() -> None:
    catalog = load_catalog(ROOT / "schemas")
    form = params.refinalize_params(catalog)
    assert form["table"]["enum"] == ["user_hourly"] and form["table"]["default"] == "user_hourly"
    assert form["first_hour"]["format"] == "date-time" and form["include_late"]["type"] == "boolean"
    assert {spec["section"] for spec in form.values()} == {"What", "Hours", "Options"}
    assert params.replan_params()["target_fill"]["maximum"] == 1

"""A trailing newline never passes as part of a name (issue 16 item 7).

``re.match`` with a pattern ending in ``$`` accepts ``"name\\n"``: ``$`` also matches just before a
final newline. Every identifier check outside the settings package uses ``fullmatch``; one test per place.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest

from widehouse.catalog import load_catalog
from widehouse.catalog.offline import render_offline_sql
from widehouse.catalog.types import check_identifier
from widehouse.contracts.identity import app_of, validate_app_id
from widehouse.errors import ConfigError, PlanError, PulsarError
from widehouse.offline.spark import OfflineSpec
from widehouse.planner.io import plan_from_dict
from widehouse.planner.live import TopicSelection
from widehouse.planner.model import check_topic
from widehouse.pulsar.topics import TopicName

ROOT = Path(__file__).parents[2]
TOPIC = "persistent://bigolive/live/gift_send"


def test_catalog_identifier() -> None:
    assert check_identifier("gift_send") is None
    problem = check_identifier("gift_send\n")
    assert problem is not None
    assert problem.startswith("'gift_send\\n' is not a safe identifier")


def test_offline_sql_database() -> None:
    source = next(s for t in load_catalog(ROOT / "schemas").wide_tables for s in t.offline)
    assert "`offline`" in render_offline_sql(source, "offline")
    with pytest.raises(Exception, match=re.escape("Hive database name 'offline\\n' is not a plain")):
        render_offline_sql(source, "offline\n")


def test_offline_spec_database() -> None:
    day = (dt.date(2026, 1, 1),)
    assert OfflineSpec(users=10, days=day, database="offline").validate().database == "offline"
    with pytest.raises(ConfigError, match=re.escape("--database 'offline\\n' is not a plain")):
        OfflineSpec(users=10, days=day, database="offline\n").validate()


def test_app_id() -> None:
    assert validate_app_id("demo.app-1") == "demo.app-1"
    with pytest.raises(ConfigError, match=re.escape("option appId='demo\\n' is invalid")):
        validate_app_id("demo\n")
    assert app_of("widehouse-demo") == "demo"
    assert app_of("widehouse-demo\n") is None


def test_planner_topic() -> None:
    assert check_topic(TOPIC) == TOPIC
    with pytest.raises(PlanError, match=re.escape(f"topic {TOPIC + chr(10)!r} is not a full Pulsar topic")):
        check_topic(TOPIC + "\n")


def test_planner_namespace_selection() -> None:
    assert TopicSelection(namespaces=("bigolive/live",)).namespaces == ("bigolive/live",)
    with pytest.raises(
        ConfigError, match=re.escape("--namespace 'bigolive/live\\n' must be tenant/namespace")
    ):
        TopicSelection(namespaces=("bigolive/live\n",))


def test_plan_group_name() -> None:
    def body(name: str) -> dict[str, object]:
        group = {"name": name, "topics": [TOPIC], "load": 1.0, "cores": 1}
        return {"groups": [group], "partitions": {TOPIC: 2}}

    assert plan_from_dict(body("g001")).groups[0].name == "g001"
    with pytest.raises(PlanError, match=re.escape("groups[0].name: 'g001\\n' is not a safe group name")):
        plan_from_dict(body("g001\n"))


def test_pulsar_topic_name() -> None:
    assert str(TopicName.parse(TOPIC)) == TOPIC
    with pytest.raises(PulsarError, match=re.escape(f"{TOPIC + chr(10)!r} is not a full Pulsar topic name")):
        TopicName.parse(TOPIC + "\n")

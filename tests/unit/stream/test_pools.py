"""The fair scheduler's pools of a stream app: one per slot group (read by Spark's scheduler)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.conftest import settings_for
from widehouse.spark.session import spark_conf
from widehouse.stream.options import GroupSpec
from widehouse.stream.spark.job import pools_xml, scheduler_pools, session_overrides


def test_each_group_gets_a_pool_of_equal_weight_that_runs_its_own_jobs_in_order() -> None:
    root = ET.fromstring(pools_xml(["g001", "g002"]))
    assert root.tag == "allocations"
    pools = {
        p.get("name"): (p.findtext("schedulingMode"), p.findtext("weight"), p.findtext("minShare"))
        for p in root.findall("pool")
    }
    assert pools == {"g001": ("FIFO", "1", "0"), "g002": ("FIFO", "1", "0")}


def test_a_group_name_is_quoted_in_the_file() -> None:
    root = ET.fromstring(pools_xml(['a"<b>&c']))
    assert [p.get("name") for p in root.findall("pool")] == ['a"<b>&c']


def test_the_app_declares_its_groups_pools_in_a_file_of_its_own(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    conf = session_overrides(settings, [GroupSpec("g001", ("a",)), GroupSpec("g002", ("b",))], tmp_path)
    assert conf["spark.sql.catalogImplementation"] == "in-memory"
    pools = ET.parse(tmp_path / "pools.xml").getroot()
    assert conf["spark.scheduler.allocation.file"] == (tmp_path / "pools.xml").as_uri()
    assert [p.get("name") for p in pools.findall("pool")] == ["g001", "g002"]


def test_a_users_own_allocation_file_is_kept(tmp_path: Path) -> None:
    settings = settings_for(
        tmp_path, WIDEHOUSE_SPARK_CONF="spark.scheduler.allocation.file=file:///etc/pools.xml"
    )
    conf = session_overrides(settings, [GroupSpec("g001", ("a",))], tmp_path)
    assert not (tmp_path / "pools.xml").exists()
    session = spark_conf(settings, "widehouse-stream-g001", conf)
    assert session["spark.scheduler.allocation.file"] == "file:///etc/pools.xml"


def test_the_pools_alone_for_a_session_handed_to_an_app(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    conf = scheduler_pools(settings, [GroupSpec("g001", ("a",))], tmp_path)
    assert conf == {"spark.scheduler.allocation.file": (tmp_path / "pools.xml").as_uri()}
    users = settings_for(tmp_path, WIDEHOUSE_SPARK_CONF="spark.scheduler.allocation.file=file:///etc/p.xml")
    assert scheduler_pools(users, [GroupSpec("g001", ("a",))], tmp_path / "x") == {}


def test_the_demo_session_declares_its_stream_groups_pools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The demo hands its own session (Hive on) to its stream app: the pools are declared there, as
    a stream job's own session has them (Spark otherwise warns about each group's pool)."""
    import widehouse.spark.session as session_module
    from widehouse.demo.spark import demo_session

    seen: dict[str, list[str]] = {}

    def build_session(settings: object, app_name: str, overrides: dict[str, str]) -> str:
        # what Spark would read as the session starts
        path = Path(overrides["spark.scheduler.allocation.file"].removeprefix("file://"))
        seen[app_name] = [p.get("name") or "" for p in ET.parse(path).getroot().findall("pool")]
        return "session"

    monkeypatch.setattr(session_module, "build_session", build_session)
    groups = [GroupSpec("g001", ("a",)), GroupSpec("g002", ("b",))]
    assert demo_session(settings_for(tmp_path), groups) == "session"
    assert seen == {"widehouse-demo": ["g001", "g002"]}

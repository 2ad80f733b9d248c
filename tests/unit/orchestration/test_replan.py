"""A replan from no traffic keeps the plan in force unless forced (real plan files, a traffic CSV)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from widehouse.orchestration.replan import NoTrafficError, versioned_replan
from widehouse.planner import load_plan
from widehouse.settings import Settings, load_settings

FLOWING = (
    "topic,msg_rate,byte_rate\n"
    "persistent://acme/app/huge,10000,60000000\n"
    "persistent://acme/app/small,10,20000\n"
)
IDLE = "topic,msg_rate,byte_rate\npersistent://acme/app/huge,0,0\npersistent://acme/app/small,0,0\n"
T0 = dt.datetime(2026, 11, 22, 9, tzinfo=dt.UTC)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings({"WIDEHOUSE_STATE_DIR": str(tmp_path / "state")})


def csv(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(body)
    return path


def files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def test_a_replan_from_no_traffic_is_refused_and_the_plan_in_force_kept(
    settings: Settings, tmp_path: Path
) -> None:
    knobs = settings.planner
    first = versioned_replan(settings, knobs, traffic_csv=csv(tmp_path, "flowing.csv", FLOWING), now=T0)
    current = settings.state_dir / "plan.json"
    assert first.version.name == "plan-20261122T090000Z.json"
    assert current.read_bytes() == first.version.read_bytes()
    before = files(settings.state_dir)

    idle = csv(tmp_path, "idle.csv", IDLE)
    with pytest.raises(NoTrafficError) as refused:
        versioned_replan(settings, knobs, traffic_csv=idle, now=T0 + dt.timedelta(hours=1))
    message = str(refused.value)
    assert "all 2 topic(s) have zero load" in message and f"traffic file {idle}" in message
    assert f"the plan in force {current} was kept" in message and "force" in message
    assert files(settings.state_dir) == before  # nothing written, no new version

    forced = versioned_replan(settings, knobs, traffic_csv=idle, force=True, now=T0 + dt.timedelta(hours=2))
    assert forced.version.name == "plan-20261122T110000Z.json"
    plan = load_plan(current)
    assert current.read_bytes() == forced.version.read_bytes()
    assert sorted(t for g in plan.groups for t in g.topics) == [
        "persistent://acme/app/huge",
        "persistent://acme/app/small",
    ]
    assert [g.load for g in plan.groups] == [0.0] * len(plan.groups)
    assert sorted(files(settings.state_dir / "plans")) == [
        "plan-20261122T090000Z.json",
        "plan-20261122T110000Z.json",
    ]


def test_without_a_plan_in_force_nothing_is_written(settings: Settings, tmp_path: Path) -> None:
    with pytest.raises(NoTrafficError, match="no plan was written"):
        versioned_replan(settings, settings.planner, traffic_csv=csv(tmp_path, "idle.csv", IDLE), now=T0)
    assert not settings.state_dir.exists() or files(settings.state_dir) == {}


def test_one_topic_with_traffic_is_enough(settings: Settings, tmp_path: Path) -> None:
    some = "topic,msg_rate,byte_rate\npersistent://acme/app/huge,0,0\npersistent://acme/app/small,1,0\n"
    done = versioned_replan(settings, settings.planner, traffic_csv=csv(tmp_path, "some.csv", some), now=T0)
    assert (settings.state_dir / "plan.json").read_bytes() == done.version.read_bytes()

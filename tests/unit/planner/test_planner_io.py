"""The plan file: the streaming job's contract, round trips, and validation naming file and field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from widehouse.errors import PlanError
from widehouse.planner import PlannerSettings, TopicTraffic, dump_plan, load_plan, plan, save_plan

S = PlannerSettings(slot_capacity=1000.0, message_cost=0.0, partition_capacity=250.0)
A, B, C = (f"persistent://acme/app/{n}" for n in "abc")


def sample_plan() -> Any:
    return plan([TopicTraffic(A, 1, 100.0), TopicTraffic(B, 2, 200.0), TopicTraffic(C, 3, 2500.0)], S)


def write(tmp_path: Path, body: Any) -> Path:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(body))
    return path


def valid_body() -> dict[str, Any]:
    return {
        "groups": [
            {"name": "g001", "topics": [A, B], "load": 300.0, "cores": 1},
            {"name": "iso-c-1234abcd", "topics": [C], "load": 2500, "cores": 4, "isolated": True},
        ],
        "partitions": {A: 1, B: 1, C: 10},
    }


def test_the_file_has_the_contract_keys_and_round_trips(tmp_path: Path) -> None:
    original = sample_plan()
    path = save_plan(original, tmp_path / "out" / "plan.json")
    body = json.loads(path.read_text())
    assert {"groups", "partitions"} <= set(body)
    for group in body["groups"]:
        assert {"name", "topics", "load", "cores"} <= set(group)
    assert body["partitions"] == {A: 1, B: 1, C: 10}
    assert body["settings"]["slot_capacity"] == 1000.0
    loaded = load_plan(path)
    assert loaded.groups == original.groups
    assert dict(loaded.partitions) == dict(original.partitions)
    assert loaded.settings == S and loaded.next_group == original.next_group
    assert dump_plan(loaded) == path.read_text()
    assert not list((tmp_path / "out").glob(".plan.json.*"))  # no temp file left behind


def test_a_minimal_hand_written_plan_loads_and_answers_group_lookups(tmp_path: Path) -> None:
    loaded = load_plan(write(tmp_path, valid_body()))
    assert loaded.group("g001").topics == (A, B)
    assert loaded.group("iso-c-1234abcd").cores == 4
    assert loaded.group_of(C).isolated
    assert loaded.next_group == 1 and loaded.settings is None
    with pytest.raises(
        PlanError, match=r"plan .*plan.json has no group 'g999' \(groups: g001, iso-c-1234abcd\)"
    ):
        loaded.group("g999")


def test_a_replan_from_a_hand_written_plan_never_reuses_its_numbers(tmp_path: Path) -> None:
    loaded = load_plan(write(tmp_path, valid_body()))
    new = TopicTraffic("persistent://acme/app/new", 0, 450.0)
    result = plan([TopicTraffic(A, 0, 300), TopicTraffic(B, 0, 300), new], S, loaded)
    assert result.group_of(new.topic).name == "g002"


def mutate(body: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    target: Any = body
    keys = path.split(".")
    for key in keys[:-1]:
        target = target[int(key)] if isinstance(target, list) else target[key]
    last = keys[-1]
    if value is DELETE:
        del target[last]
    elif isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value
    return body


DELETE = object()


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (
            "groups.1.topics",
            [A],
            r"groups\[1\] \(iso-c-1234abcd\)\.topics: .*acme/app/a is already in group g001",
        ),
        ("groups.0.topics", [], r"groups\[0\] \(g001\)\.topics: a group needs at least one topic"),
        ("groups.0.topics", [A, A], r"groups\[0\] \(g001\)\.topics: a topic is listed twice"),
        ("groups.0.name", "G 1", r"groups\[0\]\.name: 'G 1' is not a safe group name"),
        ("groups.1.name", "g001", r"groups\[1\]\.name: group 'g001' appears twice"),
        ("groups.0.cores", 0, r"groups\[0\] \(g001\)\.cores: expected an integer >= 1"),
        ("groups.0.load", -1, r"groups\[0\] \(g001\)\.load: expected bytes/s >= 0"),
        ("groups.0.load", DELETE, r"groups\[0\]: missing field 'load'"),
        (
            "groups.0.topics",
            ["acme/app/a", B],
            r"groups\[0\] \(g001\)\.topics: topic 'acme/app/a' is not a full",
        ),
        ("partitions", DELETE, r"missing field 'partitions'"),
        (
            "partitions.persistent://acme/app/a",
            0,
            r"partitions\[persistent://acme/app/a\]: expected an integer",
        ),
        ("partitions.persistent://acme/app/zzz", 1, r"partitions: persistent://acme/app/zzz in no group"),
        (
            "groups.0.isolated",
            True,
            r"groups\[0\] \(g001\)\.isolated: an isolated group holds exactly one topic",
        ),
        ("version", 2, r"version: unsupported plan version 2"),
        ("settings", {"slot_capacity": -1}, r"settings: planner setting slot_capacity=-1 must be > 0"),
        ("settings", {"capacity": 1}, r"settings: unknown field\(s\) capacity"),
        ("next_group", 0, r"next_group: expected an integer >= 1"),
    ],
)
def test_invalid_plans_name_the_file_and_field(tmp_path: Path, path: str, value: Any, message: str) -> None:
    body = valid_body()
    if path == "partitions.persistent://acme/app/a":
        body["partitions"][A] = value
    elif path == "partitions.persistent://acme/app/zzz":
        body["partitions"]["persistent://acme/app/zzz"] = value
    else:
        body = mutate(body, path, value)
    file = write(tmp_path, body)
    with pytest.raises(PlanError, match=message) as info:
        load_plan(file)
    assert str(file) in str(info.value)


def test_missing_partition_counts_are_named(tmp_path: Path) -> None:
    body = valid_body()
    del body["partitions"][B]
    with pytest.raises(PlanError, match=r"partitions: no partition count for persistent://acme/app/b"):
        load_plan(write(tmp_path, body))


def test_unreadable_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match=r"cannot read plan .*nope.json"):
        load_plan(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(PlanError, match=r"plan .*bad.json is not valid JSON"):
        load_plan(bad)
    bad.write_text("[]")
    with pytest.raises(PlanError, match=r"plan .*bad.json: expected a JSON object"):
        load_plan(bad)

"""The plan file: deterministic JSON out, validated JSON in.

Format (version 1)::

    {
      "version": 1,
      "settings": {"slot_capacity": ..., ...},          # the PlannerSettings the plan was made with
      "next_group": 4,                                  # next packed group number (never reused)
      "groups": [{"name": "g001", "topics": [...], "load": 1234.5, "cores": 1, "isolated": false}, ...],
      "partitions": {"persistent://t/n/topic": 2, ...},
      "loads": {"persistent://t/n/topic": 1234.5, ...}  # per-topic load the plan was made from
    }

``groups`` (each with ``name``, ``topics``, ``load`` in bytes/s, ``cores``) and ``partitions`` are
the contract with the streaming job; the other keys are optional when reading. Groups are sorted
by name, topics and map keys sorted, loads rounded to 0.001: the same plan always serializes to the
same bytes. :func:`load_plan` rejects a plan that lists a topic twice, a group without topics, a
duplicate or unsafe group name, a topic without a partition count, and names the file and field.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

from widehouse.errors import ConfigError, PlanError
from widehouse.planner.model import GROUP_NAME_RE, Group, Plan, check_topic
from widehouse.settings import PlannerSettings

VERSION = 1


def plan_to_dict(plan: Plan) -> dict[str, Any]:
    body: dict[str, Any] = {"version": VERSION}
    if plan.settings is not None:
        body["settings"] = dataclasses.asdict(plan.settings)
    body["next_group"] = plan.next_group
    body["groups"] = [
        {
            "name": g.name,
            "topics": sorted(g.topics),
            "load": _round(g.load),
            "cores": g.cores,
            "isolated": g.isolated,
        }
        for g in sorted(plan.groups, key=lambda g: g.name)
    ]
    body["partitions"] = {t: plan.partitions[t] for t in sorted(plan.partitions)}
    if plan.loads:
        body["loads"] = {t: _round(plan.loads[t]) for t in sorted(plan.loads)}
    return body


def dump_plan(plan: Plan) -> str:
    """The plan as JSON text (byte-identical for equal plans)."""
    return json.dumps(plan_to_dict(plan), indent=2, ensure_ascii=True, allow_nan=False) + "\n"


def save_plan(plan: Plan, path: str | os.PathLike[str]) -> Path:
    """Write the plan atomically (a temp file renamed over ``path``)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(dump_plan(plan))
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def load_plan(path: str | os.PathLike[str]) -> Plan:
    """Read and validate a plan file; PlanError names the file and the offending field."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise PlanError(f"cannot read plan {source}: {exc.strerror or exc}") from exc
    try:
        body = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PlanError(f"plan {source} is not valid JSON: {exc}") from exc
    return plan_from_dict(body, source)


def plan_from_dict(body: Any, source: str = "<plan>") -> Plan:
    """Validate a decoded plan (see the module docstring)."""
    if not isinstance(body, dict):
        raise PlanError(f"plan {source}: expected a JSON object")
    version = body.get("version", VERSION)
    if version != VERSION:
        raise PlanError(f"plan {source}: version: unsupported plan version {version!r} (expected {VERSION})")
    for key in ("groups", "partitions"):
        if key not in body:
            raise PlanError(f"plan {source}: missing field {key!r}")
    groups = _groups(body["groups"], source)
    seen: dict[str, str] = {}
    for index, group in enumerate(groups):
        for topic in group.topics:
            if topic in seen:
                raise PlanError(
                    f"plan {source}: groups[{index}] ({group.name}).topics: {topic} is already in group "
                    f"{seen[topic]}"
                )
            seen[topic] = group.name
    partitions = _partitions(body["partitions"], source)
    missing = sorted(set(seen) - set(partitions))
    if missing:
        raise PlanError(f"plan {source}: partitions: no partition count for {_some(missing)}")
    extra = sorted(set(partitions) - set(seen))
    if extra:
        raise PlanError(f"plan {source}: partitions: {_some(extra)} in no group")
    loads = _loads(body.get("loads", {}), source)
    settings = _settings(body.get("settings"), source)
    next_group = body.get("next_group", 1)
    if isinstance(next_group, bool) or not isinstance(next_group, int) or next_group < 1:
        raise PlanError(f"plan {source}: next_group: expected an integer >= 1, got {next_group!r}")
    return Plan(
        groups=tuple(groups),
        partitions=partitions,
        loads=loads,
        settings=settings,
        next_group=next_group,
        source=source,
    )


def _groups(value: Any, source: str) -> list[Group]:
    if not isinstance(value, list):
        raise PlanError(f"plan {source}: groups: expected a list")
    groups: list[Group] = []
    names: set[str] = set()
    for index, raw in enumerate(value):
        group = _group(raw, f"plan {source}: groups[{index}]")
        if group.name in names:
            raise PlanError(f"plan {source}: groups[{index}].name: group {group.name!r} appears twice")
        names.add(group.name)
        groups.append(group)
    return groups


def _group(raw: Any, where: str) -> Group:
    if not isinstance(raw, dict):
        raise PlanError(f"{where}: expected an object")
    for key in ("name", "topics", "load", "cores"):
        if key not in raw:
            raise PlanError(f"{where}: missing field {key!r}")
    name = raw["name"]
    if not isinstance(name, str) or not GROUP_NAME_RE.fullmatch(name):
        raise PlanError(
            f"{where}.name: {name!r} is not a safe group name (lower-case letters, digits, - and _)"
        )
    where = f"{where} ({name})"
    topics = raw["topics"]
    if not isinstance(topics, list):
        raise PlanError(f"{where}.topics: expected a list")
    if not topics:
        raise PlanError(f"{where}.topics: a group needs at least one topic")
    for topic in topics:
        check_topic(topic, f"{where}.topics")
    if len(set(topics)) != len(topics):
        raise PlanError(f"{where}.topics: a topic is listed twice")
    load = raw["load"]
    if isinstance(load, bool) or not isinstance(load, int | float) or not math.isfinite(load) or load < 0:
        raise PlanError(f"{where}.load: expected bytes/s >= 0, got {load!r}")
    cores = raw["cores"]
    if isinstance(cores, bool) or not isinstance(cores, int) or cores < 1:
        raise PlanError(f"{where}.cores: expected an integer >= 1, got {cores!r}")
    isolated = raw.get("isolated", False)
    if not isinstance(isolated, bool):
        raise PlanError(f"{where}.isolated: expected true or false")
    if isolated and len(topics) != 1:
        raise PlanError(f"{where}.isolated: an isolated group holds exactly one topic")
    return Group(name, tuple(topics), float(load), cores, isolated)


def _partitions(value: Any, source: str) -> dict[str, int]:
    if not isinstance(value, dict):
        raise PlanError(f"plan {source}: partitions: expected an object of topic -> count")
    out: dict[str, int] = {}
    for topic, count in value.items():
        check_topic(topic, f"plan {source}: partitions")
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise PlanError(f"plan {source}: partitions[{topic}]: expected an integer >= 1, got {count!r}")
        out[topic] = count
    return out


def _loads(value: Any, source: str) -> dict[str, float]:
    if not isinstance(value, dict):
        raise PlanError(f"plan {source}: loads: expected an object of topic -> bytes/s")
    out: dict[str, float] = {}
    for topic, load in value.items():
        if isinstance(load, bool) or not isinstance(load, int | float) or not math.isfinite(load) or load < 0:
            raise PlanError(f"plan {source}: loads[{topic}]: expected bytes/s >= 0, got {load!r}")
        out[str(topic)] = float(load)
    return out


def _settings(value: Any, source: str) -> PlannerSettings | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise PlanError(f"plan {source}: settings: expected an object")
    known = {f.name for f in dataclasses.fields(PlannerSettings)}
    unknown = sorted(set(value) - known)
    if unknown:
        raise PlanError(f"plan {source}: settings: unknown field(s) {', '.join(unknown)}")
    try:
        return PlannerSettings(**value)
    except ConfigError as exc:
        raise PlanError(f"plan {source}: settings: {exc}") from exc


def _round(value: float) -> float:
    return round(value, 3) + 0.0  # + 0.0 turns -0.0 into 0.0


def _some(items: list[str], limit: int = 5) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")

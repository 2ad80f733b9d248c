"""`widehouse plan --traffic FILE.csv ...` run as a user would (a subprocess; no services)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from widehouse.planner import load_plan

TRAFFIC = (
    "topic,msg_rate,byte_rate\n"
    "persistent://acme/app/huge,10000,60000000\n"
    "persistent://acme/app/mid,1000,4000000\n"
    "acme/app/small,10,20000\n"
    "acme/app/idle,0,0\n"
)


def run_plan(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "widehouse", "plan", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "WIDEHOUSE_STATE_DIR": str(tmp_path / "state"), **(env or {})},
        timeout=120,
        check=False,
    )


def test_plan_from_csv_writes_the_plan_and_prints_groups_load_and_fill(tmp_path: Path) -> None:
    traffic = tmp_path / "traffic.csv"
    traffic.write_text(TRAFFIC)
    out = run_plan(
        tmp_path, "--traffic", str(traffic), "--slot-capacity", "20MB", "--output", str(tmp_path / "p.json")
    )
    assert out.returncode == 0, out.stderr
    result = load_plan(tmp_path / "p.json")
    huge = result.group_of("persistent://acme/app/huge")
    # load 60 MB/s + 10,000 msg/s x 500 B = 65 MB/s; 16 MB/s per core at 80% fill -> 5 cores
    assert huge.isolated and huge.cores == 5 and huge.load == 65_000_000
    assert result.partitions["persistent://acme/app/huge"] == 13
    packed = result.group_of("persistent://acme/app/small")
    assert packed.topics == (
        "persistent://acme/app/idle",
        "persistent://acme/app/mid",
        "persistent://acme/app/small",
    )
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["group", "topics", "load", "cores", "fill", "vs", "previous"]
    assert any(
        line.split()[:6] == [huge.name, "persistent://acme/app/huge", "65.0", "MB/s", "5", "65%"]
        for line in lines
    )
    assert any(line.split()[:6] == ["g001", "3", "topics", "4.5", "MB/s", "1"] for line in lines)
    assert (
        "4 topics in 2 groups (1 packed, 1 isolated; lower bound 2) on 6 cores (lower bound 4 at 100% fill)"
        in out.stdout
    )
    assert "isolated: persistent://acme/app/huge" in out.stdout


def test_replan_with_previous_reports_moves_and_is_deterministic(tmp_path: Path) -> None:
    traffic = tmp_path / "traffic.csv"
    traffic.write_text(TRAFFIC)
    env = {"WIDEHOUSE_PLAN_SLOT_CAPACITY": "28000000"}  # isolation above 28 MB/s x 0.5
    first = tmp_path / "first.json"
    assert run_plan(tmp_path, "--traffic", str(traffic), "--output", str(first), env=env).returncode == 0
    again = tmp_path / "again.json"
    assert run_plan(tmp_path, "--traffic", str(traffic), "--output", str(again), env=env).returncode == 0
    assert first.read_bytes() == again.read_bytes()

    # mid becomes heavy enough to be isolated, small vanishes, a new topic arrives
    traffic.write_text(
        TRAFFIC.replace("1000,4000000", "1000,14000000").replace("acme/app/small,10,20000\n", "")
        + "acme/app/new,5,5000\n"
    )
    second = tmp_path / "second.json"
    out = run_plan(
        tmp_path, "--traffic", str(traffic), "--previous", str(first), "--output", str(second), env=env
    )
    assert out.returncode == 0, out.stderr
    assert f"vs {first}: 1 topics moved (33.3%), 1 new, 1 dropped; groups +1 -0" in out.stdout
    plan = load_plan(second)
    assert plan.group_of("persistent://acme/app/mid").isolated
    assert plan.group_of("persistent://acme/app/new").name == "g001"


def test_flags_override_the_environment(tmp_path: Path) -> None:
    traffic = tmp_path / "traffic.csv"
    traffic.write_text(TRAFFIC)
    out = run_plan(
        tmp_path,
        "--traffic",
        str(traffic),
        "--output",
        str(tmp_path / "p.json"),
        "--max-partitions",
        "4",
        env={"WIDEHOUSE_PLAN_SLOT_CAPACITY": "100000000", "WIDEHOUSE_PLAN_MAX_PARTITIONS": "2"},
    )
    assert out.returncode == 0, out.stderr
    body = json.loads((tmp_path / "p.json").read_text())
    assert body["settings"]["slot_capacity"] == 100_000_000
    assert body["settings"]["max_partitions"] == 4
    assert body["partitions"]["persistent://acme/app/huge"] == 4


def test_bad_input_is_a_one_line_error(tmp_path: Path) -> None:
    traffic = tmp_path / "traffic.csv"
    traffic.write_text("topic,msg_rate,byte_rate\nacme/app/x,1,-1\n")
    out = run_plan(tmp_path, "--traffic", str(traffic), "--output", str(tmp_path / "p.json"))
    assert out.returncode == 1
    assert f"widehouse: error: {traffic}:2: byte_rate: must be a finite number >= 0" in out.stderr
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "p.json").exists()

    out = run_plan(tmp_path, "--traffic", str(traffic), "--output", "p.json", "--slot-capacity", "fast")
    assert out.returncode == 2 and "--slot-capacity: 'fast' is not a rate" in out.stderr

    out = run_plan(
        tmp_path,
        "--traffic",
        str(traffic),
        "--output",
        "p.json",
        "--isolation",
        "0.9",
        "--target-fill",
        "0.5",
    )
    assert out.returncode == 2
    assert "isolation=0.9 must be <= target_fill=0.5" in out.stderr

    out = run_plan(
        tmp_path, "--traffic", str(traffic), "--output", "p.json", "--previous", str(tmp_path / "none.json")
    )
    assert out.returncode == 1 and "cannot read plan" in out.stderr

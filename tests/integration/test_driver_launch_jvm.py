"""Launch plans with the real launcher, driver JVM and Spark: the JVM spark-submit would start.

Each driver starts in a subprocess (this process may have a JVM already) and reports its JVM's
command line and environment from ``/proc``. The yardstick is a driver started through spark-submit
(``WIDEHOUSE_SPARK_LAUNCH_PLANS_DIR=off``), Spark's own scripts and launcher.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from widehouse.spark.driver_launch import SUBMIT_CLASS

pytestmark = pytest.mark.spark

_DRIVER = """
import json
from widehouse.settings import load_settings
from widehouse.spark.session import build_session
spark = build_session(load_settings(), "launch-plan-test", {"spark.sql.catalogImplementation": "in-memory"})
pid = spark.sparkContext._gateway.proc.pid
with open(f"/proc/{pid}/cmdline") as f:
    command = f.read().split("\\0")[:-1]
with open(f"/proc/{pid}/environ") as f:
    env = dict(kv.split("=", 1) for kv in f.read().split("\\0") if "=" in kv)
hashes = spark.sparkContext.parallelize(range(2), 2).map(lambda _: hash("widehouse")).collect()
print("driver:", json.dumps({"command": command, "env": env, "hashes": hashes}))
"""

_PER_START = (
    "_",
    "_PYSPARK_DRIVER_CONN_INFO_PATH",
    "WIDEHOUSE_SPARK_LAUNCH_PLANS_DIR",
    "WIDEHOUSE_SPARK_FORK_SERVER",
)
"""Environment variables that differ between any two starts (or name this test's switch; the fork
server's socket is named per driver process)."""

_PER_START_CONFS = ("spark.local.dir",)
"""Settings whose value differs between any two starts (each process's own scratch dir)."""


def _driver(plans: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", _DRIVER],
        env={**os.environ, "WIDEHOUSE_SPARK_LAUNCH_PLANS_DIR": plans},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("driver: "))
    report: dict[str, Any] = json.loads(line.removeprefix("driver: "))
    return report


def _shape(command: list[str]) -> tuple[list[str], list[str]]:
    """The JVM's command: its head as it is, its SparkSubmit arguments in any order."""
    cut = command.index(SUBMIT_CLASS) + 1
    args = [
        f"{arg.partition('=')[0]}=<per start>" if arg.startswith(_PER_START_CONFS) else arg
        for arg in command[cut:]
    ]
    return command[:cut], sorted(args)


def _env(report: dict[str, Any]) -> dict[str, str]:
    return {k: v for k, v in report["env"].items() if k not in _PER_START}


def test_a_planned_driver_is_the_jvm_spark_submit_starts(tmp_path: Path) -> None:
    plans = tmp_path / "plans"
    yardstick = _driver("off")
    first = _driver(str(plans))  # no plan yet: the launcher runs (without the scripts), a plan is kept
    assert _shape(first["command"]) == _shape(yardstick["command"])
    assert _env(first) == _env(yardstick)
    assert _env(first)["PYTHONHASHSEED"] == "0" and _env(first)["SPARK_ENV_LOADED"] == "1"

    # the next driver starts from the plan, not from a launcher: a mark put into the kept plan shows
    (plan,) = plans.glob("plan-*.json")
    kept = json.loads(plan.read_text())
    kept["head"].insert(-1, "-Dwidehouse.test.plan=kept")
    plan.write_text(json.dumps(kept))
    second = _driver(str(plans))
    head, args = _shape(second["command"])
    assert "-Dwidehouse.test.plan=kept" in head
    assert (head[:-2] + head[-1:], args) == _shape(yardstick["command"])
    assert _env(second) == _env(yardstick)

    # each JVM runs a job, and its Python workers see what spark-submit gives them (the hash seed)
    seeded = subprocess.run(
        [sys.executable, "-c", "print(hash('widehouse'))"],
        env={**os.environ, "PYTHONHASHSEED": "0"},
        capture_output=True,
        text=True,
        check=True,
    )
    expected = int(seeded.stdout)
    for report in (yardstick, first, second):
        assert report["hashes"] == [expected, expected]

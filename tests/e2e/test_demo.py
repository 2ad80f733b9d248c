"""The README's main job as a user runs it: ``widehouse demo``, end to end on the real services.

A short run (20 s of traffic) in its own state dir and under its own tenants, so it neither sees nor
resets a developer's demo. The demo checks ClickHouse and Delta against the generator's manifest and
returns its checks as data (``--result``); this test asserts on that result.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from widehouse.settings import Settings

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]


def test_demo_runs_the_pipeline_and_matches_the_manifest(services: Settings, tmp_path: Path) -> None:
    suffix = "demo" + uuid.uuid4().hex[:6]
    env = {
        **os.environ,
        "WIDEHOUSE_STATE_DIR": str(tmp_path),
        "WIDEHOUSE_TENANT_SUFFIX": suffix,
        "WIDEHOUSE_CLICKHOUSE_DATABASE": f"wh_{suffix}",  # the demo resets its tables: not a shared one
        "WIDEHOUSE_SPARK_MASTER": "local[2]",
        "WIDEHOUSE_STREAM_TRIGGER_SECONDS": "2",
    }
    command = [
        sys.executable,
        "-m",
        "widehouse",
        "demo",
        "--seconds",
        "20",
        "--rate",
        "300",
        "--users",
        "300",
        "--result",
        str(tmp_path / "result.json"),
    ]
    out = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900, check=False)
    text = out.stdout + out.stderr
    assert out.returncode == 0, text
    result = json.loads((tmp_path / "result.json").read_text())
    checks = {c["name"]: c for c in result["checks"]}
    batch = {name for name in checks if "final" in name or "silver" in name}
    # the batch part: finalized hours in both stores, then each day through HBase (names carry the day)
    assert {"clickhouse final (view) user_hourly", "delta silver user_hourly"} <= batch
    assert any(n.startswith("clickhouse final user_daily ") and n.endswith("(stream columns)") for n in batch)
    assert any(n.endswith("a row per stream or Hive user") for n in batch)
    assert set(checks) - batch == {
        "clickhouse user_hourly",
        "delta user_hourly",
        "clickhouse user_daily",
        "delta user_daily",
        "clickhouse quarantine",
        "delta quarantine",
        "clickhouse late events",
        "delta late events",
    }
    assert all(c["ok"] for c in checks.values()), checks
    assert all(int(c["expected"]) > 0 for c in checks.values()), "the run must produce data of every kind"
    assert result["ok"] is True
    assert result["figures"]["messages"] > 0
    titles = [s["title"] for s in result["sections"]]
    assert any("top users by activity" in t for t in titles)
    for view in ("hourly_topic_volume", "daily_actives_by_country", "top_gifters_daily", "finalized_periods"):
        assert any(view in t for t in titles), view
    totals = next(s for s in result["sections"] if s["title"].startswith("the same totals"))
    assert all(row[1] == row[2] for row in totals["rows"]), totals  # ClickHouse and Delta agree
    assert "widehouse services down" in out.stdout  # it ends by saying how to stop

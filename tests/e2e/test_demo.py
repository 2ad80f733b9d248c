"""The README's main job as a user runs it: ``widehouse demo``, end to end on the real services.

A short run (20 s of traffic) in its own state dir and under its own tenants, so it neither sees nor
resets a developer's demo. The demo itself checks ClickHouse and Delta against the generator's
manifest and exits non-zero on any difference; this test also checks what it prints.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from widehouse.settings import Settings

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]


def test_demo_runs_the_pipeline_and_matches_the_manifest(services: Settings, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "WIDEHOUSE_STATE_DIR": str(tmp_path),
        "WIDEHOUSE_TENANT_SUFFIX": "demo" + uuid.uuid4().hex[:6],
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
    ]
    out = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900, check=False)
    text = out.stdout + out.stderr
    assert out.returncode == 0, text
    for check in (
        "clickhouse user_hourly",
        "delta user_hourly",
        "clickhouse user_daily",
        "delta user_daily",
        "clickhouse quarantine",
        "delta quarantine",
        "clickhouse late events",
        "delta late events",
    ):
        line = next((x for x in out.stdout.splitlines() if x.startswith(check)), "")
        assert line.rstrip().endswith("exact match"), f"{check}: {line!r}\n{text}"
    assert "top users by activity" in out.stdout
    assert "events per topic per hour" in out.stdout
    assert "widehouse services down" in out.stdout  # it ends by saying how to stop
    assert "DIFFERENT" not in out.stdout

"""The demo path as a user runs it: `widehouse smoke` against the running services."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from widehouse.settings import Settings

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]


def test_smoke_round_trips_every_part(services: Settings, tmp_path: Path) -> None:
    # its own state dir (the embedded metastore admits one process); ClickHouse is the shared service
    env = {**os.environ, "WIDEHOUSE_STATE_DIR": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-m", "widehouse", "smoke"],
        capture_output=True, text=True, env=env, timeout=600, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    rows = {line.split()[0]: line.split()[1] for line in out.stdout.splitlines()[2:] if line.strip()}
    assert rows == {"pulsar": "ok", "hbase": "ok", "clickhouse": "ok", "spark-delta-hive": "ok"}
    assert any((tmp_path / "delta" / "smoke").iterdir())

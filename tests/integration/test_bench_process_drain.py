"""The drain benchmark's own-process run: a real `widehouse stream` process, its start-up counted
from before that process started (issue 28's measure), its rows exact."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from bench.stream_wide import Bench, _check, process_drain
from widehouse.generator.options import GenerateOptions
from widehouse.generator.run import generate
from widehouse.settings import Settings

pytestmark = [pytest.mark.integration, pytest.mark.clickhouse, pytest.mark.spark]


def test_a_process_drain_counts_its_start_up_from_the_process_start(
    services: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WIDEHOUSE_CLICKHOUSE_PASSWORD", services.local.clickhouse_password)
    suffix = f"b{uuid.uuid4().hex[:7]}"
    bench = Bench(tmp_path / "bench")
    try:
        manifest = generate(
            bench.settings("drain", suffix=suffix),
            GenerateOptions(count=600, rate=0, users=20, tenant_suffix=suffix, create_topics=True),
        )
        topics = sorted(manifest.published_name(t) for t in manifest.topics)
        before = time.time()
        run = process_drain(bench, "tp", suffix, topics, 2, part="proc")
        after = time.time()
        assert _check(run["app_obj"], manifest) == "exact"
        assert run["batches"] >= 2 and run["events"] > 0  # both groups, from the process's progress rows
        # from the process's start: its interpreter, imports and JVM are inside (seconds, not zero)
        first_batch = min(r["t"] - r["s"] for r in run["series"])
        assert 1.0 < run["startup_s"] < run["app_s"] <= after - before
        assert before + run["startup_s"] <= first_batch + 1.0
    finally:
        bench.close()

"""The benchmarks leave nothing in the shared, long-lived services (the real ClickHouse service)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from bench.stream_wide import Bench
from widehouse import clickhouse
from widehouse.settings import Settings

pytestmark = [pytest.mark.integration, pytest.mark.clickhouse]


def _databases(settings: Settings) -> set[str]:
    client = clickhouse.connect(settings.clickhouse)
    try:
        return {str(r[0]) for r in client.rows("SELECT name FROM system.databases")}
    finally:
        client.close()


def test_a_bench_drops_the_clickhouse_databases_its_parts_wrote(
    services: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs used to leave every part's database behind (333 after two days) in the service that
    later runs measure."""
    # as bench/README.md asks a user to (the bench's own state dir holds no password)
    monkeypatch.setenv("WIDEHOUSE_CLICKHOUSE_PASSWORD", services.local.clickhouse_password)
    suffix = f"b{uuid.uuid4().hex[:8]}"
    bench = Bench(tmp_path / "bench")
    written = bench.settings("cleanup", suffix=suffix)
    client = clickhouse.connect(written.clickhouse)  # creates the part's database, as a stream app does
    client.command("CREATE TABLE t (x UInt8) ENGINE = MergeTree ORDER BY x")
    client.close()
    kept = f"it_kept_{uuid.uuid4().hex[:8]}"
    other = clickhouse.connect(services.clickhouse)
    other.command(f"CREATE DATABASE `{kept}`")
    try:
        assert {written.clickhouse.database, kept} <= _databases(services)
        bench.close()
        after = _databases(services)
        assert written.clickhouse.database not in after
        assert kept in after  # only the bench's own
        assert not (tmp_path / "bench").exists()
    finally:
        other.command(f"DROP DATABASE IF EXISTS `{kept}`")
        other.close()


@pytest.mark.spark
def test_a_bench_in_a_tests_process_leaves_its_spark_session_running(
    services: Settings, spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a bench's own process (``python -m bench``) stops its Spark session as it closes: a
    test's process shares one session with every later test."""
    monkeypatch.setenv("WIDEHOUSE_CLICKHOUSE_PASSWORD", services.local.clickhouse_password)
    Bench(tmp_path / "bench").close()
    assert spark.range(3).count() == 3

"""The streaming job on the standalone cluster: the hand-written golden fixture, two slot groups.

The same check as tests/integration/test_golden_stream.py (every wide row and column in ClickHouse
and Delta against tests/golden/expected.yaml, every quarantine reason, the per-topic counts), with
the driver in client mode against ``spark://`` and the executors running the shipped environment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_golden_stream import _deployment, check_golden_stream
from widehouse.settings import Settings

pytestmark = [pytest.mark.cluster, pytest.mark.integration, pytest.mark.spark]


def test_golden_fixture_on_the_cluster_equals_clickhouse_and_delta(
    services: Settings, spark: Any, cluster_env: dict[str, str], tmp_path: Path
) -> None:
    deployment = _deployment(tmp_path, cluster_env)
    assert deployment.settings.spark.master.startswith("spark://")
    check_golden_stream(deployment, spark)

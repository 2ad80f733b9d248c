"""A lost or reset checkpoint is refused at start (issue 16 item 3): its batch ids would restart at 0
and the sinks would skip the new batches as replays of the ones they already hold."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.integration.stream_support import Deployment, expected
from widehouse.settings import Settings

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]


def test_a_lost_checkpoint_is_refused_and_nothing_is_written(
    services: Settings, spark: Any, tmp_path: Path
) -> None:
    deployment = Deployment(tmp_path, extra_env={"WIDEHOUSE_STREAM_MAX_MESSAGES": "400"})
    manifest = deployment.publish(1000, seed=21)
    deployment.plan_groups(1)
    run = deployment.stream()
    assert run.returncode == 0, run.stdout[-5000:]
    batches = deployment.committed_batches("g001")
    assert len(batches) >= 2
    progress = "SELECT count() AS n, max(batch_id) AS top FROM stream_progress"
    before = deployment.clickhouse(progress)

    app = deployment.settings.stream.app
    shutil.rmtree(deployment.settings.stream.checkpoint("g001"))  # lost
    deployment.publish(300, seed=22)  # new data the reset batch ids would carry
    refused = deployment.stream()
    assert refused.returncode != 0
    message = refused.stdout
    assert "slot group 'g001'" in message, message[-3000:]
    assert f"app '{app}'" in message
    assert f"clickhouse batch {max(batches)}" in message
    assert f"delta batch {max(batches)}" in message
    assert "is empty or missing" in message
    assert "Traceback" not in message
    assert deployment.clickhouse(progress) == before  # nothing written
    deployment.assert_sinks_match(spark, expected(manifest))  # the first run's data, exactly

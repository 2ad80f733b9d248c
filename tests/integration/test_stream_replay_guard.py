"""A catalog changed between a crash and its replay is refused; restored, the replay completes exactly.

The app is SIGKILLed right after ClickHouse took batch 1 (Delta has not), the catalog copy is changed
(the ``logins`` count gets another filter), and the restart must refuse to replay batch 1 with a
message naming the group, the batch, both fingerprints and the recovery. With the catalog restored the
same checkpoint completes and both sinks equal the generator's manifest.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.stream_support import Deployment, expected
from tests.support import copy_catalog
from widehouse.catalog import load_catalog
from widehouse.settings import Settings
from widehouse.stream.replay_guard import group_fingerprint

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]


def test_a_catalog_change_before_a_replay_is_refused_then_the_restored_catalog_completes(
    services: Settings, spark: Any, tmp_path: Path
) -> None:
    schemas = copy_catalog(tmp_path)
    deployment = Deployment(
        tmp_path,
        schemas_dir=schemas,
        extra_env={"WIDEHOUSE_STREAM_MAX_MESSAGES": "500", "WIDEHOUSE_STREAM_MAX_RESTARTS": "0"},
    )
    manifest = deployment.publish(1500, seed=21, topics=".*/login$")
    login = next(str(t.name) for t in deployment.catalog.topics if t.name.local == "login")
    deployment.plan_groups(1, topics=[login])

    killed = deployment.stream("--fault", "after-clickhouse@1:kill")
    assert killed.returncode == -signal.SIGKILL, killed.stdout[-5000:]
    assert deployment.committed_batches("g001") == [0]

    topic_file = next(schemas.glob("topics/**/login.yaml"))
    original = topic_file.read_text()
    doc = yaml.safe_load(original)
    doc["columns"]["user_hourly"]["logins"]["filter"] = "result = 'timeout'"
    topic_file.write_text(yaml.safe_dump(doc, sort_keys=False))
    changed = group_fingerprint(load_catalog(schemas).relocated(deployment.suffix), (login,))

    refused = deployment.stream()
    assert refused.returncode == 1, refused.stdout[-5000:]
    assert "CatalogChangedError" in refused.stdout
    assert "slot group g001" in refused.stdout and "batch 1 was first written" in refused.stdout
    assert f"is being replayed with {changed}" in refused.stdout
    assert "restore the catalog" in refused.stdout
    assert deployment.committed_batches("g001") == [0]

    topic_file.write_text(original)
    done = deployment.stream()
    assert done.returncode == 0, done.stdout[-5000:]
    assert len(deployment.committed_batches("g001")) >= 3
    deployment.assert_sinks_match(spark, expected(manifest))


def test_a_record_made_and_dropped_through_the_sessions_file_system(spark: Any, tmp_path: Path) -> None:
    """What a batch that fails before its sinks does (``BatchWriter._forget_record``), on the real
    Hadoop file system the records live on: the file the guard wrote is gone, and the replay may
    use another catalog."""
    from widehouse.stream.progress import BatchIdentity
    from widehouse.stream.replay_guard import CatalogChangedError
    from widehouse.stream.spark.replay import drop_batch_record, guard_batch

    checkpoint = str(tmp_path / "checkpoint" / "g001")
    batch = BatchIdentity("app", "g001", 6)
    record = tmp_path / "checkpoint" / "g001" / "widehouse" / "catalog" / "6.json"
    assert guard_batch(spark, checkpoint, "aaaa1111", batch) is True
    assert '"fingerprint": "aaaa1111"' in record.read_text()
    assert guard_batch(spark, checkpoint, "aaaa1111", batch) is False  # a replay, same catalog
    drop_batch_record(spark, checkpoint, batch)
    assert not record.exists()
    assert guard_batch(spark, checkpoint, "bbbb2222", batch) is True
    with pytest.raises(CatalogChangedError):
        guard_batch(spark, checkpoint, "aaaa1111", batch)

"""SIGKILL a stream writing to Pulsar in the middle of a micro-batch, restart it: every row once.

The app (this file is also its entry point) reads a source topic with the ``pulsar`` source and
writes each message to one of two target topics (one partitioned) with the ``pulsar`` sink,
routed by ``__topic``. Each micro-batch has two tasks; in batch ``KILL_BATCH`` a pass-through step
in front of the sink holds the task of partition 1 (marker, then sleep) while partition 0's task
writes its rows: the batch is partly in Pulsar and Spark has not committed it. The test waits until
those rows are in Pulsar, kills the app's process group, publishes more and restarts; the replayed
batch must add only what was missing. (A task cut off inside its own rows is covered by
``test_pulsar_sink.py::test_a_replayed_task_sends_only_what_is_missing``: a Python worker buffers
its output, so a step in front of the sink cannot hand it part of a task's rows and then stop.)
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from widehouse.pulsar import client as pulsar_client
from widehouse.pulsar.admin import PulsarAdmin
from widehouse.settings import Settings

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]

KILL_BATCH = 1
PER_BATCH = 400


def run_app(spark: Any, source: dict[str, str], ns: str, checkpoint: str, marker: str, hold_s: float) -> None:
    """Source topic -> even/odd target topics, AvailableNow."""
    from widehouse.source import register

    register(spark)

    def hold(batches: Any) -> Any:
        from pyspark import TaskContext

        context = TaskContext.get()
        if (
            hold_s > 0
            and context.getLocalProperty("streaming.sql.batchId") == str(KILL_BATCH)
            and context.partitionId() == 1
        ):
            Path(marker).write_text("held")
            time.sleep(hold_s)  # the test kills the app here
        yield from batches

    frame = spark.readStream.format("pulsar").options(**source).load()
    routed = frame.selectExpr(
        "value",
        f"if(cast(regexp_extract(cast(value as string), '([0-9]+)$', 1) as int) % 2 = 0, "
        f"'persistent://{ns}/even', 'persistent://{ns}/odd') as __topic",
        "__key",
    )
    query = (
        routed.mapInArrow(hold, routed.schema)
        .writeStream.format("pulsar")
        .option("requireExactlyOnce", "true")
        .option("batchingMaxMessages", "16")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()


def test_kill_mid_batch_and_restart_writes_every_row_once(
    spark: Any, services: Settings, ns: str, tmp_path: Path
) -> None:
    from tests.integration.pulsar_support import app_held_at_marker, publish, read_all  # also a script
    from widehouse.pulsar.dedup import enable_deduplication
    from widehouse.source import source_options

    source, even, odd = f"persistent://{ns}/source", f"persistent://{ns}/even", f"persistent://{ns}/odd"
    client = pulsar_client.connect(services.pulsar)
    try:
        with PulsarAdmin(services.pulsar) as admin:
            enable_deduplication(admin, ns)
            admin.ensure_partitions(source, 2)
            admin.ensure_partitions(even, 3)
        sent = publish(client, source, 1000, 25, "a", keys=37)
        options = source_options(
            services.pulsar,
            [source],
            appId="sinkcrash",
            startingOffsets="earliest",
            maxMessagesPerTrigger=PER_BATCH,
            minTasks=2,
        )
        checkpoint, marker = tmp_path / "checkpoint", tmp_path / "held.json"
        args = [json.dumps(options), ns, str(checkpoint), str(marker)]
        with app_held_at_marker(__file__, args, marker, tmp_path / "state"):
            # wait until partition 0's part of the held batch is in Pulsar (batch 0 wrote PER_BATCH)
            deadline = time.monotonic() + 60
            while len(read_all(services.pulsar, even) + read_all(services.pulsar, odd)) <= PER_BATCH:
                assert time.monotonic() < deadline, "the held batch sent nothing"
                time.sleep(0.5)
            time.sleep(1.0)  # and that task's last sends
        assert (checkpoint / "offsets" / str(KILL_BATCH)).exists()
        assert not (checkpoint / "commits" / str(KILL_BATCH)).exists()
        before = len(read_all(services.pulsar, even) + read_all(services.pulsar, odd))
        assert PER_BATCH < before < 2 * PER_BATCH  # killed with the batch partly written

        sent += publish(client, source, 300, 25, "b", keys=37)  # while it is down
        run_app(spark, options, ns, str(checkpoint), str(marker), hold_s=0)

        evens = [m.data().decode() for m in read_all(services.pulsar, even)]
        odds = [m.data().decode() for m in read_all(services.pulsar, odd)]
        assert len(evens) + len(odds) == len(sent), "duplicates or losses"
        assert sorted(evens + odds) == sorted(sent)
        assert all(int(p.rsplit("#", 1)[1][1:]) % 2 == 0 for p in evens)
        assert all(int(p.rsplit("#", 1)[1][1:]) % 2 == 1 for p in odds)
    finally:
        client.close()


if __name__ == "__main__" and len(sys.argv) == 6 and sys.argv[1] == "app":
    from widehouse.testing.spark import small_session

    ns, checkpoint, marker = sys.argv[3:]
    run_app(
        small_session("pulsar-sink-crash-test"), json.loads(sys.argv[2]), ns, checkpoint, marker, hold_s=600
    )

"""Kill a streaming app in the middle of a micro-batch, restart it: nothing lost, nothing doubled.

The app runs in its own process group (this file is also its entry point: ``python
test_pulsar_source_crash.py app ...``). Its sink is idempotent per batch id (parquet per batch)
and, for one batch, writes its rows and then sleeps before Spark can commit: SIGKILL lands there.
On restart Spark replays that batch from its logged offsets; the source must return the very
same messages (checked against what the killed run wrote), then go on with what arrived meanwhile.
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

KILL_BATCH = 2


def run_app(
    spark: Any, options: dict[str, str], checkpoint: str, out: str, hold_batch: int, hold_s: float
) -> None:
    """The streaming app: AvailableNow into parquet files per batch id."""
    from widehouse.source import register

    register(spark)

    def sink(df: Any, batch_id: int) -> None:
        df.write.mode("overwrite").parquet(f"{out}/batch={batch_id}")
        if batch_id == hold_batch:
            payloads = sorted(r.value.decode() for r in df.select("value").collect())
            marker = Path(out).parent / f"written-{batch_id}.json"
            marker.write_text(json.dumps(payloads))
            time.sleep(hold_s)  # the test kills the app here: rows written, batch not committed

    query = (
        spark.readStream.format("pulsar")
        .options(**options)
        .load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()


def test_kill_mid_batch_and_restart_loses_and_doubles_nothing(
    spark: Any, services: Settings, ns: str, tmp_path: Path
) -> None:
    from tests.integration.pulsar_support import app_held_at_marker, publish  # this file is also a script
    from widehouse.source import source_options

    orders, clicks = f"persistent://{ns}/orders", f"persistent://{ns}/clicks"
    client = pulsar_client.connect(services.pulsar)
    try:
        with PulsarAdmin(services.pulsar) as admin:
            admin.ensure_partitions(orders, 2)
        sent = publish(client, orders, 1000, 25, "a") + publish(client, clicks, 500, 25, "a")
        options = source_options(
            services.pulsar,
            [orders, clicks],
            appId="crash",
            startingOffsets="earliest",
            maxMessagesPerTrigger=300,
        )
        checkpoint, out = tmp_path / "checkpoint", tmp_path / "out"
        marker = tmp_path / f"written-{KILL_BATCH}.json"
        args = [json.dumps(options), str(checkpoint), str(out)]
        with app_held_at_marker(__file__, args, marker, tmp_path / "state"):
            time.sleep(0.5)
        # killed mid-batch: the batch's offsets are logged, its commit is not
        assert (checkpoint / "offsets" / str(KILL_BATCH)).exists()
        assert not (checkpoint / "commits" / str(KILL_BATCH)).exists()
        written_before_kill = json.loads(marker.read_text())
        assert len(written_before_kill) == 300

        sent += publish(client, orders, 120, 25, "b") + publish(
            client, clicks, 80, 25, "b"
        )  # while it is down
        marker.unlink()
        run_app(spark, options, str(checkpoint), str(out), hold_batch=KILL_BATCH, hold_s=0)

        replayed = json.loads(marker.read_text())
        assert replayed == written_before_kill  # the replayed batch read exactly the same messages
        rows = spark.read.parquet(str(out)).select("value").collect()
        payloads = [r.value.decode() for r in rows]
        assert len(payloads) == len(set(payloads)), "duplicates"
        assert set(payloads) == set(sent), f"missing {len(set(sent) - set(payloads))}"
        # the restarted app moved its subscriptions to the end
        with PulsarAdmin(services.pulsar) as admin:
            for name in (f"{orders}-partition-0", f"{orders}-partition-1", clicks):
                deadline = time.monotonic() + 15
                while admin.topic_stats(name)["subscriptions"]["widehouse-crash"]["msgBacklog"] != 0:
                    assert time.monotonic() < deadline, f"subscription on {name} not at the end"
                    time.sleep(0.3)
    finally:
        client.close()


if __name__ == "__main__" and len(sys.argv) == 5 and sys.argv[1] == "app":
    from widehouse.testing.spark import small_session

    options, checkpoint, out = json.loads(sys.argv[2]), sys.argv[3], sys.argv[4]
    run_app(small_session("pulsar-crash-test"), options, checkpoint, out, hold_batch=KILL_BATCH, hold_s=600)

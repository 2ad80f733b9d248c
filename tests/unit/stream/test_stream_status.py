"""The status line a drain shows on a terminal (``widehouse stream --available-now``)."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace


def test_status_sums_the_groups_and_shows_each_ones_lag(tmp_path: Path) -> None:
    from tests.conftest import settings_for
    from widehouse.stream.options import GroupSpec, RunOptions
    from widehouse.stream.spark.job import StreamApp

    app = StreamApp(
        settings_for(tmp_path),
        [GroupSpec(f"g00{i}", (f"t{i}",)) for i in range(1, 5)],
        RunOptions(available_now=True),
        spark=object(),
    )
    app.writers = {  # type: ignore[dict-item]
        "g001": SimpleNamespace(drained=120_000, lag=30_000, batches=2),
        "g002": SimpleNamespace(drained=80_000, lag=0, batches=1),
        "g003": SimpleNamespace(drained=0, lag=None, batches=0),
        "g004": SimpleNamespace(drained=0, lag=5, batches=0),
    }
    app.failed = {"g004": "too many failures"}
    app.queries = {"g001": object(), "g003": object()}  # g002 finished its drain
    app._started = time.monotonic() - 10
    status = app.status()
    assert status.startswith("read 200,000  ")
    assert " msg/s" in status  # 200,000 over ~10 s
    assert status.endswith(
        "g001: 2 batches, lag 30,000  g002: 1 batches, done  g003: 0 batches, lag ?  "
        "g004: 0 batches, given up"
    )


def test_a_long_running_writer_keeps_the_last_timings_and_counts_every_batch(tmp_path: Path) -> None:
    from tests.support import batch_writer
    from widehouse.stream.spark.batch import TIMINGS_KEPT

    writer = batch_writer(tmp_path)  # no batch is written here
    for batch_id in range(TIMINGS_KEPT + 5):
        writer._record(batch_id, 10, [("read+transform", 0.5), ("merge", 0.1)])
    assert writer.batches == TIMINGS_KEPT + 5
    # bounded: a live stream writes a batch every few seconds, for months
    assert len(writer.timings) == TIMINGS_KEPT
    assert writer.timings[0] == {"batch_id": 5, "rows_in": 10, "read+transform": 0.5, "merge": 0.1}
    assert writer.timings[-1]["batch_id"] == TIMINGS_KEPT + 4

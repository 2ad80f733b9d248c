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
        "g001": SimpleNamespace(drained=120_000, lag=30_000, timings=[{}, {}]),
        "g002": SimpleNamespace(drained=80_000, lag=0, timings=[{}]),
        "g003": SimpleNamespace(drained=0, lag=None, timings=[]),
        "g004": SimpleNamespace(drained=0, lag=5, timings=[]),
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

"""ClickHouse through the local service (HTTP) vs in-process chDB: wide partial-row inserts, merged reads.

The same data both ways: an AggregatingMergeTree-like table of 60 columns (uid, hour and 58
SimpleAggregateFunction columns), fed batches of 20,000 partial rows (each row fills a few value
columns, as the streaming job's pre-aggregated partial rows do) with ``insert_arrow`` and a
deduplication token, then read back through the merged view (``GROUP BY uid, hour``).

``service``     ``python -m widehouse.clickhouse.server`` in its own process, clickhouse-connect over HTTP
                (default lz4 insert compression), ``--handles`` engine handles.
``in-process``  ``clickhouse_connect.get_client(interface="chdb", path=...)`` in this process.

Figures: insert latency per batch (median) and rows/s with 1 and ``--threads`` writers (each its own
client), a replay of every batch (deduplicated: the
sum of a value column must not change), and two reads of the merged view: the whole view
as Arrow and a small aggregate over it (median of ``--runs``).

    python -m bench clickhouse_service [--batches 10] [--rows 20000] [--threads 4] [--handles 4] [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from bench.common import machine, median_time, save, table

PASSWORD = "bench"
VALUES = 58
HEADER = ["mode", "writers", "rows", "insert s/batch (median)", "rows/s", "replay adds to sum",
          "view -> Arrow s", "view rows", "aggregate s"]  # fmt: skip


def ddl(name: str) -> list[str]:
    cols = ", ".join(
        f"c{i:02d} SimpleAggregateFunction(sum, UInt64)"
        if i % 2 == 0
        else f"c{i:02d} SimpleAggregateFunction(anyLast, Nullable(Float64))"
        for i in range(VALUES)
    )
    merged = ", ".join(
        f"sum(c{i:02d}) AS c{i:02d}" if i % 2 == 0 else f"anyLast(c{i:02d}) AS c{i:02d}"
        for i in range(VALUES)
    )
    return [
        f"CREATE TABLE {name} (uid String, hour DateTime('UTC'), {cols}) ENGINE = AggregatingMergeTree "
        "ORDER BY (uid, hour) SETTINGS non_replicated_deduplication_window = 10000",
        f"CREATE VIEW {name}_v AS SELECT uid, hour, {merged} FROM {name} GROUP BY uid, hour",
    ]


def batches(count: int, rows: int, seed: int = 7) -> list[pa.Table]:
    """Partial rows: ~10% of the value columns filled per row (others 0 / NULL), 20% distinct keys."""
    rng = np.random.default_rng(seed)
    out = []
    for b in range(count):
        uids = rng.integers(0, max(1, rows // 5), rows)
        data: dict[str, pa.Array] = {
            "uid": pa.array([f"u{u:07d}" for u in uids]),
            "hour": pa.array(
                1_700_000_000 + 3600 * (rng.integers(0, 4, rows) + b // 4), pa.timestamp("s", "UTC")
            ),
        }
        filled = rng.random((rows, VALUES)) < 0.1
        for i in range(VALUES):
            if i % 2 == 0:
                data[f"c{i:02d}"] = pa.array(
                    np.where(filled[:, i], rng.integers(1, 100, rows), 0), pa.uint64()
                )
            else:
                data[f"c{i:02d}"] = pa.array(rng.random(rows), pa.float64(), mask=~filled[:, i])
        out.append(pa.table(data))
    return out


# -------------------------------------------------------------------------------- the two ways
class Service:
    def __init__(self, data_dir: Path, handles: int) -> None:
        log = data_dir.parent / "service.log"
        argv = [sys.executable, "-m", "widehouse.clickhouse.server", "--data-dir", str(data_dir),
                "--port", "0", "--handles", str(handles), "--log-file", str(log)]  # fmt: skip
        env = {**os.environ, "WIDEHOUSE_CLICKHOUSE_PASSWORD": PASSWORD}
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("ready:"):
            raise RuntimeError(f"the service did not start: {line!r}")
        self.port = int(line.split(" on http://", 1)[1].split()[0].rsplit(":", 1)[1])

    def client(self) -> Any:
        import clickhouse_connect

        return clickhouse_connect.get_client(
            host="127.0.0.1", port=self.port, username="default", password=PASSWORD
        )

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(60)


class InProcess:
    def __init__(self, data_dir: Path) -> None:
        self.path = str(data_dir)

    def client(self) -> Any:
        import clickhouse_connect

        return clickhouse_connect.get_client(interface="chdb", path=self.path)

    def close(self) -> None:
        pass


def run_mode(mode: str, engine: Any, data: list[pa.Table], writers: int, runs: int) -> list[object]:
    name = f"wide_{mode.replace('-', '_')}_{writers}"
    admin = engine.client()
    for statement in ddl(name):
        admin.command(statement)
    latencies: list[float] = []
    clients = [engine.client() for _ in range(writers)]

    def write(k: int, token_prefix: str, record: bool) -> None:
        for b in range(k, len(data), writers):
            t0 = time.perf_counter()
            clients[k].insert_arrow(
                name, data[b], settings={"insert_deduplication_token": f"{token_prefix}{b}"}
            )
            if record:
                latencies.append(time.perf_counter() - t0)

    wall = _parallel(writers, lambda k: write(k, "b", True))
    total = f"SELECT sum(c00) FROM {name}"  # unlike count(), unchanged by background merges
    before = admin.command(total)
    _parallel(writers, lambda k: write(k, "b", False))  # replay: deduplicated
    replay_added = admin.command(total) - before
    rows = sum(t.num_rows for t in data)
    view = admin.query_arrow(f"SELECT * FROM {name}_v")
    view_s = median_time(lambda: admin.query_arrow(f"SELECT * FROM {name}_v"), runs=runs)
    agg_s = median_time(lambda: admin.query(f"SELECT count(), sum(c00), max(c01) FROM {name}_v"), runs=runs)
    return [
        mode,
        writers,
        rows,
        statistics.median(latencies),
        rows / wall,
        replay_added,
        view_s,
        view.num_rows,
        agg_s,
    ]


def _parallel(n: int, fn: Callable[[int], None]) -> float:
    errors: list[BaseException] = []

    def guarded(k: int) -> None:
        try:
            fn(k)
        except BaseException as exc:  # surfaced below, after every thread ended
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(k,)) for k in range(n)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return time.perf_counter() - t0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench clickhouse_service", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--rows", type=int, default=20_000, help="rows per batch")
    parser.add_argument("--threads", type=int, default=4, help="parallel writers in the second run")
    parser.add_argument("--handles", type=int, default=4, help="engine handles of the service")
    parser.add_argument("--runs", type=int, default=5, help="timed reads (median)")
    args = parser.parse_args(argv)

    print(f"machine: {machine()}")
    data = batches(args.batches, args.rows)
    print(f"data: {args.batches} batches x {args.rows:,} rows x {data[0].num_columns} columns "
          f"({sum(t.nbytes for t in data) / 1e6:.0f} MB in Arrow)")  # fmt: skip
    rows: list[list[object]] = []
    root = Path(tempfile.mkdtemp(prefix="bench-chs-"))
    try:
        service = Service(root / "service" / "data", args.handles)
        try:
            for writers in (1, args.threads):
                rows.append(run_mode("service", service, data, writers, args.runs))
        finally:
            service.close()
        in_process = InProcess(root / "in-process")
        for writers in (1, args.threads):
            rows.append(run_mode("in-process", in_process, data, writers, args.runs))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(table("\nClickHouse service (HTTP) vs in-process chDB", HEADER, rows))
    path = save("clickhouse_service", {"args": vars(args), "header": HEADER, "rows": rows})
    print(f"\nsaved {path}")
    return 0

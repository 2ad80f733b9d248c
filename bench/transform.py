"""Per-event CPU of the stream's transform (parse + classify + fold) on one core, no Spark, no Pulsar.

Generates N demo-catalog messages (1% bad, 0.5% late) as the Pulsar source yields them (Arrow
record batches of 8,192 rows) and times :func:`widehouse.stream.transform.transform` over them, in
this process: core-µs per event = CPU seconds / events. ``--profile`` writes a pyinstrument HTML
profile beside the results.

    python -m bench transform [--events 200000] [--runs 3] [--profile]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

from bench.common import machine, save, table

ROOT = Path(__file__).parents[1]


def source_batches(events: int, rows: int = 8192) -> tuple[Any, list[Any]]:
    """The catalog and ``events`` generated messages as the source's Arrow batches."""
    import pyarrow as pa

    from widehouse.catalog import load_catalog
    from widehouse.testing import generated_source_batch

    catalog = load_catalog(ROOT / "schemas")
    whole = pa.Table.from_batches([generated_source_batch(catalog, events, users=5000, late_rate=0.005)])
    return catalog, whole.to_batches(max_chunksize=rows)


def run_once(catalog: Any, batches: list[Any]) -> tuple[float, float, int]:
    """(CPU s, wall s, output rows) of one transform over every batch (one input partition)."""
    from bench.common import stream_plan
    from widehouse.stream.transform import transform

    plans = stream_plan()
    topics = sorted({t for b in batches for t in set(b.column("__topic").to_pylist())})
    plan = plans.TransformPlan.for_topics(catalog, topics)
    cpu, wall = time.process_time(), time.perf_counter()
    out = sum(b.num_rows for b in transform(iter(batches), plan))
    return time.process_time() - cpu, time.perf_counter() - wall, out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench transform", description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="write a pyinstrument profile (HTML)")
    args = parser.parse_args(argv)
    print(f"machine: {machine()}")
    catalog, batches = source_batches(args.events)
    events = sum(b.num_rows for b in batches)
    runs = [run_once(catalog, batches) for _ in range(args.runs)]
    cpu = statistics.median(r[0] for r in runs)
    wall = statistics.median(r[1] for r in runs)
    results: dict[str, Any] = {
        "events": events,
        "cpu_s": cpu,
        "wall_s": wall,
        "core_us_per_event": cpu / events * 1e6,
        "events_per_core_s": events / cpu,
        "output_rows": runs[0][2],
    }
    print(
        table(
            f"\ntransform (parse + classify + fold), {events:,} demo events, one core, median of {args.runs}",
            ("events", "CPU s", "wall s", "core-µs / event", "events/s per core", "output rows"),
            [(events, cpu, wall, results["core_us_per_event"], results["events_per_core_s"], runs[0][2])],
        )
    )
    if args.profile:
        from pyinstrument import Profiler

        profiler = Profiler(interval=0.0005)
        profiler.start()
        run_once(catalog, batches)
        profiler.stop()
        html = Path(save("transform", results)).with_suffix(".html")
        html.write_text(profiler.output_html())
        print(profiler.output_text(unicode=False, color=False, show_all=False)[:6000])
        print(f"profile: {html}")
    print(f"\nsaved {save('transform', results)}")
    return 0

"""CPU per event of what a stream task does: read from Pulsar, parse, classify, fold (no Spark).

Publishes N demo-catalog events (42 topics, 1% bad, 0.5% late) to the local Pulsar once, plans one
micro-batch over all of them with the source's own controller (tasks of ``messagesPerTask``), and
runs each task in this process exactly as the stream's source does
(:class:`widehouse.stream.spark.source.WideStreamReader`): ``transform_packed(read_messages(task,
lean config), plan)``. Sides: the read alone (every column, as ``format("pulsar")`` yields it), the
read alone without the metadata the transform never reads, the read as the stream's tasks do it
(the read loop's chunks, no Arrow batch, ids taken only where needed), and read + transform.

Figures are this process's CPU seconds per event (the Pulsar client's own I/O threads included,
the broker's CPU not), the median of ``--runs``; a run creates its readers anew.

    python -m bench read_transform [--events 200000] [--runs 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.common import machine, save, table

if TYPE_CHECKING:
    from bench.stream_wide import Bench


def _run(tasks: list[Any], body: Callable[[Any], Iterator[Any]]) -> tuple[float, float, int]:
    cpu, wall = time.process_time(), time.perf_counter()
    rows = sum(len(b) for task in tasks for b in body(task))
    return time.process_time() - cpu, time.perf_counter() - wall, rows


def measure(events: int, runs: int, within: Bench | None = None) -> dict[str, Any]:
    """The sides' CPU over ``events`` demo events, median of ``runs``. ``within``: the calling bench
    (its tenants are dropped, and its session stopped, when it closes); else a bench of its own."""
    from bench.common import stream_plan
    from bench.stream_wide import Bench, _suffix
    from widehouse.catalog import load_catalog
    from widehouse.generator.options import GenerateOptions
    from widehouse.generator.run import generate
    from widehouse.source.controller import StreamController
    from widehouse.source.options import parse_options, source_options
    from widehouse.source.reader import read_messages, read_task
    from widehouse.stream.transform import transform_packed

    plans = stream_plan()
    bench = within or Bench(Path(tempfile.mkdtemp(prefix="widehouse-bench-read-")), owns_spark=True)
    try:
        suffix = _suffix()
        settings = bench.settings("read", suffix=suffix)
        manifest = generate(
            settings,
            GenerateOptions(count=events, rate=0, users=5000, tenant_suffix=suffix, create_topics=True),
        )
        topics = sorted(manifest.published_name(t) for t in manifest.topics)
        catalog = load_catalog(settings.schemas_dir).relocated(suffix)
        plan = plans.TransformPlan.for_topics(catalog, topics)
        options = parse_options(
            source_options(settings.pulsar, topics, startingOffsets="earliest", durableSubscription=False),
            settings.pulsar,
        )
        controller = StreamController(options)
        try:
            start = controller.initial_offset()
            tasks = controller.plan(start, controller.latest_offset(start, None))
        finally:
            controller.stop()
        full = options.read_config
        lean = dataclasses.replace(full, metadata=False)
        sides: dict[str, Callable[[Any], Iterator[Any]]] = {
            "read, every column": lambda task: read_task(task, full),
            "read, no metadata": lambda task: read_task(task, lean),
            "read, chunks (what a stream task reads)": lambda task: read_messages(task, lean),
            "read + transform (a stream task)": lambda task: transform_packed(
                read_messages(task, lean), plan
            ),
        }
        results: dict[str, Any] = {"events": sum(t.messages for t in tasks), "tasks": len(tasks), "sides": {}}
        for name, body in sides.items():
            got = [_run(tasks, body) for _ in range(runs)]
            results["sides"][name] = {
                "cpu_s": statistics.median(g[0] for g in got),
                "wall_s": statistics.median(g[1] for g in got),
                "rows": got[0][2],
            }
        return results
    finally:
        if within is None:
            bench.close()


def render(results: dict[str, Any]) -> str:
    events = results["events"]
    rows = [
        [name, round(s["cpu_s"], 2), round(s["cpu_s"] / events * 1e6, 2), round(events / s["wall_s"])]
        for name, s in results["sides"].items()
    ]
    return table(
        f"read + parse + classify + fold, one process ({events:,} events, {results['tasks']} tasks)",
        ["side", "CPU s", "core-µs/event", "events/s (wall)"],
        rows,
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench read_transform", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    print(f"machine: {machine()}")
    results = measure(args.events, args.runs)
    print(render(results))
    print(f"saved {save('read_transform', results)}")
    return 0

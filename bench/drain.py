"""Where a drain's time and CPU go: the same pre-published events drained again and again, per process.

Publishes N demo-catalog events once, then drains them ``--repeat`` times in this process, each time
with a new app (its own ClickHouse database, Delta root and checkpoints) of ``--groups`` slot groups,
``Trigger.AvailableNow``, both sinks. The first drain pays for a cold JVM and cold Python workers;
the later ones show what a running stream pays. For each drain: events/s inside batches (events over
the sum of batch durations) and over the app's wall time, the per-phase seconds of every batch, and
the CPU seconds every process family spent meanwhile (Spark's JVM, the Python workers, the Pulsar
broker, this driver process, the ClickHouse service, HBase), read from /proc by psutil.

With ``--process`` each drain runs as a job does, in a ``widehouse stream --available-now`` process
of its own, and its start-up is counted from that process's start (its interpreter, imports and
settings included: issue 28's measure), not from ``app.start`` in this process (per-phase seconds
are then not collected).

    python -m bench drain [--events 300000] [--groups 2] [--repeat 3] [--max-messages N] [--process]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from bench.common import machine, save, table

Snapshot = dict[int, tuple[str, float]]
"""CPU seconds so far by pid: (process family, seconds)."""


def _family(cmdline: list[str]) -> str:  # noqa: PLR0911 (one return per family)
    cmd = " ".join(cmdline)
    if "java" in cmd and "pulsar" in cmd:
        return "pulsar broker"
    if "java" in cmd and "hbase" in cmd.lower():
        return "hbase"
    if "widehouse.clickhouse.server" in cmd:
        return "clickhouse service"
    if "-m widehouse stream" in cmd:  # --process: the drain's own driver process
        return "driver (this process)"
    if "widehouse.spark.fork_server" in cmd:  # imports pyspark once for the forked ones below
        return "python fork server"
    if "python_streaming_source_runner" in cmd or "pyspark.sql.worker." in cmd:
        # each query's source runner (offsets, planning, commits) and the data source's planners
        return "python planners"
    if "pyspark.daemon" in cmd or "pyspark.worker" in cmd or "pyspark/daemon" in cmd:
        return "python workers"
    if "java" in cmd and "spark" in cmd.lower():
        return "spark jvm"
    return ""


def cpu_snapshot(families: dict[int, str] | None = None) -> Snapshot:
    """CPU seconds so far of every process of a known family, by pid (this process as "driver");
    ``families`` keeps the known family of each pid between calls. Other processes are looked at
    again each time: ``spark-submit`` is a shell script that becomes the driver JVM (same pid)."""
    import os

    import psutil

    known = {} if families is None else families
    out = {}
    for process in psutil.process_iter():
        try:
            family = known.get(process.pid)
            if family is None:
                family = "driver (this process)" if process.pid == os.getpid() else _family(process.cmdline())
                if family:
                    known[process.pid] = family
            if family:
                times = process.cpu_times()
                out[process.pid] = (family, times.user + times.system)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return out


def cpu_between(
    before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]
) -> dict[str, float]:
    spent: dict[str, float] = {}
    for pid, (family, seconds) in after.items():
        spent[family] = spent.get(family, 0.0) + seconds - before.get(pid, (family, 0.0))[1]
    return dict(sorted(spent.items(), key=lambda item: -item[1]))


class CpuSampler:
    """The CPU seconds of every process of a known family over a run, including processes that
    start and exit within it (a query's source runner lives as long as its query): sampled every
    ``interval`` seconds, each process counted at its last sample (at most ``interval`` of a short
    process's CPU is missed)."""

    def __init__(self, interval: float = 0.25) -> None:
        import threading

        self.interval = interval
        self.families: dict[int, str] = {}
        self.before = cpu_snapshot(self.families)
        self.seen: Snapshot = dict(self.before)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-cpu-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.seen.update(cpu_snapshot(self.families))

    def spent(self) -> dict[str, float]:
        """Stop sampling; CPU seconds per family since the sampler started."""
        self._stop.set()
        self._thread.join()
        self.seen.update(cpu_snapshot(self.families))
        return cpu_between(self.before, self.seen)


def measure(
    events: int, groups: int, repeat: int, max_messages: int | None, *, process: bool = False
) -> dict[str, Any]:
    from bench.stream_wide import Bench, _check, _suffix, drain_app, process_drain
    from widehouse.generator.options import GenerateOptions
    from widehouse.generator.run import generate

    bench = Bench(Path(tempfile.mkdtemp(prefix="widehouse-bench-drain-")), owns_spark=True)
    try:
        suffix = _suffix()
        manifest = generate(
            bench.settings("drain", suffix=suffix),
            GenerateOptions(count=events, rate=0, users=5000, tenant_suffix=suffix, create_topics=True),
        )
        topics = sorted(manifest.published_name(t) for t in manifest.topics)
        env = {"WIDEHOUSE_STREAM_MAX_MESSAGES": str(max_messages)} if max_messages else {}
        runs = []
        for i in range(repeat):
            sampler = CpuSampler()
            drain = process_drain if process else drain_app
            run = drain(bench, f"d{i}", suffix, topics, groups, part=f"drain{i}", **env)
            run["cpu"] = sampler.spent()
            run["check"] = _check(run.pop("app_obj"), manifest)
            runs.append(run)
        return {
            "events": events,
            "groups": groups,
            "max_messages": max_messages,
            "process": process,
            "runs": runs,
        }
    finally:
        bench.close()


def _cpu_cell(run: dict[str, Any], family: str) -> str:
    seconds = run["cpu"].get(family, 0.0)
    return f"{seconds:.2f} ({seconds / max(run['events'], 1) * 1e6:.1f})"


def render(result: dict[str, Any]) -> str:
    runs = result["runs"]
    rows = [
        [
            f"drain {i + 1}" + (" (own process)" if result.get("process") else " (cold)" if i == 0 else ""),
            round(run["startup_s"], 2),
            run["batches"],
            round(run["batch_rate"]),
            round(run["wall_rate"]),
            run["check"],
            round(sum(run["cpu"].values()), 2),
        ]
        for i, run in enumerate(runs)
    ]
    out = [
        table(
            f"drain of {result['events']:,} events, {result['groups']} groups, both sinks",
            ["run", "start-up s", "batches", "ev/s in batches", "ev/s wall", "check", "CPU s (all)"],
            rows,
        )
    ]
    families = sorted({f for run in runs for f in run["cpu"]})
    out.append(
        table(
            "\nCPU seconds per process family (core-µs per event in brackets)",
            ["family", *[f"drain {i + 1}" for i in range(len(runs))]],
            [
                [
                    family,
                    *[_cpu_cell(run, family) for run in runs],
                ]
                for family in families
            ],
        )
    )
    last = runs[-1]["timings"]
    phases = [k for k in last[0] if k not in {"batch_id", "rows_in"}] if last else []
    out.append(
        table(
            "\nbatches of the last drain (seconds per phase)",
            ["batch", "rows in", *phases],
            [[t["batch_id"], t["rows_in"], *[round(t[p], 3) for p in phases]] for t in last],
        )
    )
    return "\n".join(out)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench drain", description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=300_000)
    parser.add_argument("--groups", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--max-messages", type=int, default=None, help="WIDEHOUSE_STREAM_MAX_MESSAGES")
    parser.add_argument(
        "--process",
        action="store_true",
        help="each drain in a `widehouse stream` process of its own (start-up from its start)",
    )
    args = parser.parse_args(argv)
    print(f"machine: {machine()}")
    result = measure(args.events, args.groups, args.repeat, args.max_messages, process=args.process)
    print(render(result))
    print(f"saved {save('drain', result)}")
    return 0

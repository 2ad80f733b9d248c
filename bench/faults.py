"""Fault suite: SIGKILLs of the streaming app, ClickHouse and Pulsar restarts, a full state disk.

Each scenario runs against a live generator (its own topics, ClickHouse database and state dir),
injects its faults, lets the app recover, drains the topics and compares both sinks with the
generator's manifest: lost and duplicated count the events (count columns, quarantine and late rows)
missing from or beyond the manifest. Own ClickHouse and Pulsar instances are started on free ports
for their scenarios; the shared services are never touched. The disk scenario mounts a tmpfs (root).

    python -m bench faults [--parts sigkill,clickhouse,pulsar,disk] [--kills 20] [--rate 20]
                           [--events 60000] [--keep DIR]

The SIGKILL scenario's traffic lasts until its last kill, at most events / rate seconds (a restart
costs 1-3 min on a loaded 2-core box, so allow ~3 min per kill); the others size their own traffic.
Live traffic ends as soon as a scenario is done with it (the manifest counts what was sent).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import machine, save, table

PARTS = ("sigkill", "clickhouse", "pulsar", "disk")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench faults", description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)}")
    parser.add_argument("--kills", type=int, default=20, help="SIGKILLs of the streaming app")
    parser.add_argument("--rate", type=float, default=20.0, help="generator messages per second")
    parser.add_argument(
        "--events",
        type=int,
        default=60_000,
        help="messages of the sigkill scenario (events / rate: its traffic time)",
    )
    parser.add_argument("--keep", type=Path, default=None, help="work here and keep it (logs, tables)")
    args = parser.parse_args(argv)
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        parser.error(f"--parts: unknown {', '.join(unknown)} (known: {', '.join(PARTS)})")
    root = args.keep or Path(tempfile.mkdtemp(prefix="wh-faults-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        rows = run(parts, root, args.kills, args.rate, args.events)
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    print(table(f"fault suite ({machine()})", _header(), [r.row() for r in rows]))
    print(f"saved {save('faults', {'rows': [r.__dict__ for r in rows], 'args': vars(args)})}")
    skipped = [r for r in rows if not r.injected and any(n.startswith("skipped") for n in r.notes)]
    exact = all(r.lost == 0 and r.duplicated == 0 for r in rows if r not in skipped)
    return 0 if exact else 1


def _header() -> list[str]:
    from widehouse.testing.faults import HEADER

    return HEADER


def run(parts: list[str], root: Path, kills: int, rate: float, events: int) -> list[Any]:
    from widehouse.settings import load_settings
    from widehouse.spark.session import build_session
    from widehouse.testing import fault_scenarios as scenarios
    from widehouse.testing.faults import Outcome

    spark = build_session(load_settings(), "widehouse-faults", overrides={"spark.ui.enabled": "false"})
    rows = []
    try:
        for part in parts:
            started = time.monotonic()
            try:
                if part == "sigkill":
                    row = scenarios.sigkills(root, spark, kills, rate, events)
                elif part == "clickhouse":
                    row = scenarios.clickhouse(root, spark, rate, 0)
                elif part == "pulsar":
                    row = scenarios.pulsar(root, spark, 3000)
                else:
                    row = scenarios.disk_full(root, spark, rate, 0)
            except Exception as exc:  # one scenario's failure is a row of the table, not the end
                row = Outcome(part, notes=[f"failed: {type(exc).__name__}: {exc}"])
            row.notes.append(f"{time.monotonic() - started:.0f} s")
            print(table(part, _header(), [row.row()]), flush=True)
            rows.append(row)
    finally:
        spark.stop()
    return rows

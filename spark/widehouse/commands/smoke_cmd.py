"""``widehouse smoke``: one real round trip through every part."""

from __future__ import annotations

import argparse
from typing import Any

from widehouse.commands.command import add_command
from widehouse.commands.table import render
from widehouse.settings import Settings
from widehouse.smoke import run_checks


def register(subparsers: Any) -> None:
    parser = add_command(
        subparsers,
        "smoke",
        run,
        help="round-trip real data through Pulsar, HBase, ClickHouse, Delta and Hive",
    )
    parser.add_argument("--no-spark", action="store_true", help="skip the Delta + Hive check")


def run(args: argparse.Namespace, settings: Settings) -> int:
    results = run_checks(settings, spark=not args.no_spark)
    rows = [(r.name, "ok" if r.ok else "FAILED", f"{r.seconds:.1f}s", r.detail) for r in results]
    print(render(("check", "result", "time", "detail"), rows))
    return 0 if all(r.ok for r in results) else 1

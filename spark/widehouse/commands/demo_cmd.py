"""``widehouse demo``: the main job on the local defaults (what ``make demo`` runs)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from widehouse import private
from widehouse.commands.command import add_command
from widehouse.commands.services_cmd import ensure_local_secrets
from widehouse.commands.table import render
from widehouse.settings import Settings


def register(subparsers: Any) -> None:
    parser = add_command(
        subparsers,
        "demo",
        run,
        help="run the whole pipeline locally: services, plan, generator, streams, analyst queries",
        description="Bring the local services up, plan slot groups, publish realistic traffic while the "
        "streaming queries run, then query ClickHouse and Delta and check them against the manifest. "
        "Resets the previous demo run's topics, checkpoints and tables (local defaults only).",
    )
    parser.add_argument("--rate", type=float, default=1500.0, help="messages/s published (default 1500)")
    parser.add_argument("--seconds", type=float, default=120.0, help="how long to publish (default 120)")
    parser.add_argument("--users", type=int, default=5000, help="distinct users (default 5000)")
    parser.add_argument("--groups", type=int, default=2, help="slot groups to plan for (default 2)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--result", type=Path, help="also write the demo's checks, tables and figures to this JSON file"
    )


def run(args: argparse.Namespace, settings: Settings) -> int:
    from widehouse.demo.spark import DemoOptions, run_demo

    settings = ensure_local_secrets(settings, (private.CLICKHOUSE_PASSWORD,))  # it may start the services
    options = DemoOptions(
        rate=args.rate, seconds=args.seconds, users=args.users, seed=args.seed, groups=args.groups
    )
    result = run_demo(settings, options)
    for section in result.sections:
        print(f"\n-- {section.title} --")
        print(render(section.header, section.rows))
    print("\n-- check against the generator's manifest (every key and hour / day) --")
    print(
        render(("check", "expected rows", "result"), [(c.name, c.expected, c.detail) for c in result.checks])
    )
    for note in result.notes:
        print(f"\n{note}")
    print(f"demo finished in {result.figures.get('seconds', 0):.0f}s: {'OK' if result.ok else 'FAILED'}")
    if args.result:
        result.write_json(args.result)
    return 0 if result.ok else 1

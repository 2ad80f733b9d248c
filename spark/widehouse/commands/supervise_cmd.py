"""``widehouse supervise [--reset GROUP]``: one streams-supervisor cycle, as the streams DAG runs it."""

from __future__ import annotations

import argparse
from typing import Any

from widehouse.commands.command import add_command
from widehouse.errors import ConfigError
from widehouse.orchestration.runner import run_widehouse
from widehouse.orchestration.supervisor import describe, from_settings
from widehouse.planner import load_plan
from widehouse.settings import Settings


def register(subparsers: Any) -> None:
    parser = add_command(
        subparsers,
        "supervise",
        run,
        help="one streams-supervisor cycle: one app per slot group of <state>/plan.json, restarts",
        description="Make the running streaming apps match the plan once (what the widehouse_streams DAG "
        "does every few minutes). Exit code 1 when a group keeps failing and is no longer restarted.",
    )
    parser.add_argument("--reset", metavar="GROUP", help="forget GROUP's failures, then run the cycle")


def run(args: argparse.Namespace, settings: Settings) -> int:
    plan_path = settings.state_dir / "plan.json"
    if not plan_path.is_file():
        raise ConfigError(f"no plan at {plan_path}: make one with `widehouse plan --output {plan_path}`")
    supervisor = from_settings(settings, {}, run_widehouse)
    if args.reset:
        supervisor.reset(args.reset)
    report = supervisor.cycle(load_plan(plan_path))
    print(describe(report))
    for group, why in report.given_up.items():
        print(f"\nslot group {group} is no longer restarted: {why}")
    return 1 if report.given_up else 0

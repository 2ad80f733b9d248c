"""``widehouse airflow up|down|status``: the local Airflow 3 that runs the project's dags/."""

from __future__ import annotations

import argparse
from typing import Any

from widehouse import private
from widehouse.commands.command import add_command
from widehouse.commands.services_cmd import ensure_local_secrets
from widehouse.commands.table import render
from widehouse.errors import ConfigError
from widehouse.services.airflow import AirflowStack
from widehouse.services.airflow_backfill import backfill_create
from widehouse.settings import Settings


def register(subparsers: Any) -> None:
    parser = add_command(
        subparsers,
        "airflow",
        run,
        help="run Airflow 3 (API server, scheduler, DAG processor, triggerer) on loopback with dags/",
        description="Start, stop and inspect the local Airflow. Metadata (SQLite), logs and pid files "
        "live under <state>/airflow.",
    )
    parser.add_argument(
        "action",
        choices=["up", "down", "status", "backfill"],
        help="backfill: `airflow backfill create` with the remaining arguments (e.g. --dag-id "
        "widehouse_hourly --from-date ... --to-date ...), retried while the local SQLite metadata DB "
        "is busy",
    )
    parser.add_argument("backfill_args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)


def run(args: argparse.Namespace, settings: Settings) -> int:
    if args.action == "up":  # the UI user's password, and the ClickHouse one its Connection carries
        settings = ensure_local_secrets(settings, (private.AIRFLOW_PASSWORD, private.CLICKHOUSE_PASSWORD))
    stack = AirflowStack(settings.local, settings.airflow, report=lambda msg: print(msg, flush=True))
    if args.action == "up":
        stack.up()
        print(render_status(stack))
        print(stack.login_hint())
        return 0
    if args.action == "down":
        stack.down()
        return 0
    if args.action == "backfill":
        if not args.backfill_args:
            raise ConfigError("widehouse airflow backfill: give --dag-id, --from-date and --to-date")
        return backfill_create(settings.airflow, args.backfill_args)
    if args.backfill_args:
        raise ConfigError(f"widehouse airflow {args.action} takes no more arguments: {args.backfill_args}")
    print(render_status(stack))
    healthy = stack.healthy()
    if healthy:
        print(stack.login_hint())
    return 0 if healthy else 3


def render_status(stack: AirflowStack) -> str:
    rows = [
        (s.name, s.state, s.pid or "-", ", ".join(s.endpoints), s.detail or s.log_file)
        for s in stack.status()
    ]
    return render(("component", "state", "pid", "endpoints", "detail / log"), rows)

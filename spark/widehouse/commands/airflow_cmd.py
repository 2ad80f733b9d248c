"""``widehouse airflow up|down|status``: the local Airflow 3 that runs the project's dags/."""

from __future__ import annotations

import argparse
from typing import Any

from widehouse.commands.table import render
from widehouse.services.airflow import AirflowStack
from widehouse.settings import Settings


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "airflow",
        help="run Airflow 3 (API server, scheduler, DAG processor, triggerer) on loopback with dags/",
        description="Start, stop and inspect the local Airflow. Metadata (SQLite), logs and pid files "
        "live under <state>/airflow.",
    )
    parser.add_argument("action", choices=["up", "down", "status"])
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    stack = AirflowStack(settings.local, settings.airflow, report=lambda msg: print(msg, flush=True))
    if args.action == "up":
        stack.up()
        print(render_status(stack))
        print(stack.login_hint())
        return 0
    if args.action == "down":
        stack.down()
        return 0
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

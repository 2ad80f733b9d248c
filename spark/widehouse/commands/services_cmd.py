"""``widehouse services up|down|status [NAME ...]``."""

from __future__ import annotations

import argparse
from typing import Any

from widehouse.commands.table import render
from widehouse.services import ServiceManager
from widehouse.settings import Settings


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "services",
        help="run the local services (Pulsar standalone, HBase + Thrift) on loopback",
        description="Start, stop and inspect the local services. NAME is one of: pulsar, hbase, "
        "hbase-thrift (default: all).",
    )
    parser.add_argument("action", choices=["up", "down", "status"])
    parser.add_argument("names", nargs="*", metavar="NAME")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    manager = ServiceManager(settings.local, report=lambda msg: print(msg, flush=True))
    names = args.names or None
    if args.action == "up":
        manager.up(names)
        print(render_status(manager, names))
        return 0
    if args.action == "down":
        manager.down(names)
        return 0
    print(render_status(manager, names))
    return 0 if manager.healthy(names) else 3


def render_status(manager: ServiceManager, names: list[str] | None) -> str:
    rows = [
        (s.name, s.state, s.pid or "-", ", ".join(s.endpoints), s.detail or s.log_file)
        for s in manager.status(names)
    ]
    return render(("service", "state", "pid", "endpoints", "detail / log"), rows)

"""``widehouse services up|down|status [NAME ...]``.

The first ``up`` of a state dir that starts the ClickHouse service generates its password (unless
``WIDEHOUSE_CLICKHOUSE_PASSWORD`` sets one) and prints it once; :func:`ensure_local_secrets`.
"""

from __future__ import annotations

import argparse
from typing import Any

from widehouse import private
from widehouse.commands.table import render
from widehouse.services import ServiceManager
from widehouse.settings import Settings, create_local_secrets, load_settings


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "services",
        help="run the local services (Pulsar standalone, HBase + Thrift, ClickHouse, a Spark cluster) "
        "on loopback",
        description="Start, stop and inspect the local services. NAME is one of: pulsar, hbase, "
        "hbase-thrift, clickhouse (default: these), or spark (a standalone master and workers, "
        "also spark-master / spark-worker; only when named). `down` without NAME stops them all.",
    )
    parser.add_argument("action", choices=["up", "down", "status"])
    parser.add_argument("names", nargs="*", metavar="NAME")
    parser.set_defaults(func=run)


def ensure_local_secrets(settings: Settings, names: tuple[str, ...]) -> Settings:
    """Generate the local passwords ``names`` a start needs and has neither from its variable nor from
    the state dir; print each new one once; return settings that hold them.

    ``settings`` were loaded from ``os.environ`` (the CLI's ``main``); so are the new ones.
    """
    created = create_local_secrets(names)
    for secret in created:
        print(
            f"widehouse: generated the {secret.what}: {secret.value}\n"
            f"  stored in {secret.path} (mode 0600); shown again by `widehouse config --show-secrets`; "
            f"set {secret.variable} to choose your own",
            flush=True,
        )
    return load_settings() if created else settings


def run(args: argparse.Namespace, settings: Settings) -> int:
    names = args.names or None
    if args.action == "up" and (names is None or "clickhouse" in names):
        settings = ensure_local_secrets(settings, (private.CLICKHOUSE_PASSWORD,))
    manager = ServiceManager(settings.local, report=lambda msg: print(msg, flush=True))
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

"""The ``widehouse`` command (also ``python -m widehouse``).

Each command group lives in its own module under :mod:`widehouse.commands` and registers itself
through a ``register(subparsers)`` function listed in :data:`widehouse.commands.COMMANDS`. Command
handlers receive the parsed arguments and the loaded :class:`~widehouse.settings.Settings`, and
return an exit code. Deliberate errors (:class:`~widehouse.errors.WidehouseError`) print one clear
message, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from widehouse import __version__
from widehouse.commands import COMMANDS
from widehouse.entrypoint import configure_logging, exit_code


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="widehouse",
        description="Real-time wide tables from Pulsar event topics (Spark, ClickHouse, Delta, HBase).",
    )
    parser.add_argument("--version", action="version", version=f"widehouse {__version__}")
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="debug logging, and py4j's INFO lines (a line per JVM callback)",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for register in COMMANDS:
        register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(args.verbose)
    try:
        return exit_code("widehouse", args.func, args)
    except KeyboardInterrupt:
        print("widehouse: interrupted", file=sys.stderr)
        return 130

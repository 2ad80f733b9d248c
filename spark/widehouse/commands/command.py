"""How a command module adds its subcommand: one call names it, documents it and binds its use case."""

from __future__ import annotations

import argparse
from typing import Any

from widehouse.entrypoint import UseCase


def add_command(
    subparsers: Any, name: str, run: UseCase | None, help: str, description: str | None = None
) -> argparse.ArgumentParser:
    """Add the subcommand ``name`` (``help`` in the list of commands, ``description`` on its own
    ``--help``) that calls ``run``; ``None`` for a group whose actions bind their own. Returns its
    parser, for the arguments."""
    parser: argparse.ArgumentParser = subparsers.add_parser(name, help=help, description=description)
    if run is not None:
        parser.set_defaults(func=run)
    return parser

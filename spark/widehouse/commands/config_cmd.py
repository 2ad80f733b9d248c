"""``widehouse config``: the effective settings (secrets masked unless ``--show-secrets``), or the
variable reference."""

from __future__ import annotations

import argparse
from typing import Any

from widehouse.commands.command import add_command
from widehouse.commands.table import render
from widehouse.settings import VARIABLES, Settings, describe


def register(subparsers: Any) -> None:
    parser = add_command(subparsers, "config", run, help="show the effective settings")
    parser.add_argument(
        "--variables", action="store_true", help="list every WIDEHOUSE_* variable with its default"
    )
    parser.add_argument(
        "--markdown", action="store_true", help="with --variables: a Markdown table (the README's)"
    )
    parser.add_argument(
        "--show-secrets",
        action="store_true",
        help="show passwords, tokens and DSN credentials (the generated local passwords too) unmasked",
    )


def variables_markdown() -> str:
    """The README's configuration table."""
    lines = ["| Variable | Default | Meaning |", "|---|---|---|"]
    for v in VARIABLES:
        text = v.documented_default
        default = text if text.startswith("(") else f"`{text}`"
        lines.append(f"| `{v.name}` | {default} | {v.help.replace('|', '/')} |")
    return "\n".join(lines)


def run(args: argparse.Namespace, settings: Settings) -> int:
    if args.variables and args.markdown:
        print(variables_markdown())
    elif args.variables:
        rows = [(v.name, v.documented_default, v.help) for v in VARIABLES]
        print(render(("variable", "default", "meaning"), rows))
    else:
        print(render(("setting", "value"), describe(settings, show_secrets=args.show_secrets)))
    return 0

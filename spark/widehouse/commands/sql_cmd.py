"""``widehouse sql "SELECT ..."``: run ClickHouse SQL against the configured engine and print a table.

Works the same with the embedded chDB engine (while no other process holds its data path, e.g. a
running stream) and with a ClickHouse server.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from widehouse import clickhouse
from widehouse.commands.command import add_command
from widehouse.commands.table import render
from widehouse.settings import Settings


def register(subparsers: Any) -> None:
    parser = add_command(
        subparsers, "sql", run, help="run ClickHouse SQL (embedded or server) and print the result"
    )
    parser.add_argument("query", nargs="?", help="the SQL; read from stdin when omitted")
    parser.add_argument("--limit", type=int, default=200, help="print at most this many rows (default 200)")


def run(args: argparse.Namespace, settings: Settings) -> int:
    text = args.query if args.query is not None else sys.stdin.read()
    client = clickhouse.connect(settings.clickhouse)
    try:
        result = client.query(text)
    except Exception as exc:  # show the engine's message, not a traceback
        print(f"widehouse sql: {exc}", file=sys.stderr)
        return 1
    rows = result.result_rows
    print(render(result.column_names, rows[: args.limit]))
    if len(rows) > args.limit:
        print(f"... {len(rows) - args.limit} more rows")
    return 0

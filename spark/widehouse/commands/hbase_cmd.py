"""``widehouse hbase get``: one day row of a daily table's HBase day table, decoded.

A day row is two packed cells (``s:0`` stream columns, ``h:0`` offline columns; the encoding is
documented in :mod:`widehouse.hbase.packed`); this reads the row with one ``get`` and prints every
column by name, decoded with the catalog's layouts. Exit codes: 0 printed, 3 no such row,
1 HBase unreachable or a cell that does not decode (the message names table and family).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from widehouse.contracts.periods import day_argument
from widehouse.errors import ConfigError
from widehouse.settings import Settings

NOT_FOUND = 3


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "hbase", help="read the HBase day tables (decoded packed rows)", description=__doc__.splitlines()[0]
    )
    commands = parser.add_subparsers(dest="hbase_command", metavar="SUBCOMMAND", required=True)
    get = commands.add_parser("get", help="print one day row, decoded", description=__doc__)
    get.add_argument("--table", default="user_daily", help="daily wide table (default: user_daily)")
    get.add_argument("--key", required=True, help="the row's key (e.g. a uid)")
    get.add_argument("--day", required=True, type=day_argument, help="YYYY-MM-DD")
    get.add_argument("--salt-buckets", type=int, default=None, help="default: WIDEHOUSE_HBASE_SALT_BUCKETS")
    get.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    get.set_defaults(func=get_row)


def get_row(args: argparse.Namespace, settings: Settings) -> int:
    from widehouse.catalog.loader import load_catalog
    from widehouse.commands.table import render
    from widehouse.hbase.day import read_day_row

    table = load_catalog(settings.schemas_dir).table(args.table)
    if table.grain != "day":
        raise ConfigError(f"--table {table.name} is not a daily table (grain {table.grain})")
    row = read_day_row(settings.hbase, table, args.key, args.day, args.salt_buckets)
    if not row.found:
        print(f"{row.hbase_table}: no row {row.row_key.decode()}")
        return NOT_FOUND
    if args.json:
        record = {column: value for _, column, value in row.values}
        print(json.dumps({"row": row.row_key.decode(), **record}, default=str, sort_keys=False))
        return 0
    print(f"{row.hbase_table} row {row.row_key.decode()}")
    print(
        render(["family", "column", "value"], [(f, c, "null" if v is None else v) for f, c, v in row.values])
    )
    return 0

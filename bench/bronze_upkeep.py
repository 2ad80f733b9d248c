"""A bronze Delta table's append cost as the stream ages: Delta's defaults against the bronze upkeep.

A stream commits once per batch to every bronze table, each time a few small files. This appends
``--appends`` batches of the demo catalog's shape (the ``user_hourly`` partials: 80+ columns, a
few hundred rows over two hours) through the stream's writer (``BronzeWriter``), one after the
other, to two tables in a temporary directory:

``defaults``  Delta's own: commits kept 30 days, no compaction (the stream before the upkeep).
``upkeep``    the stream's: a retention of ``--retention`` seconds (short, to stand for a stream
              that has run far longer than ``WIDEHOUSE_DELTA_BRONZE_RETENTION_SECONDS``) and a
              compaction round (``upkeep_table``) every ``--every`` appends (one upkeep interval's
              worth of batches).

Figures: milliseconds of wall and CPU per append over each stretch of ``--window`` appends, and
the commit files and live data files at the end of each stretch. Rows are checked equal in both
tables at the end.

    python -m bench bronze_upkeep [--appends 1500] [--window 250] [--every 60] [--retention 5]
"""

from __future__ import annotations

import argparse
import datetime as dt
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa

from bench.common import machine, save, table

HEADER = ["table", "appends", "ms / append (wall)", "ms / append (CPU)", "commit files", "live files"]


def _batch(schema: pa.Schema, batch: int, rows: int) -> pa.Table:
    """``rows`` partial rows of one batch, over the two hours a live batch usually touches."""
    hours = [dt.datetime(2026, 11, 28, 10 + (i % 2), tzinfo=dt.UTC) for i in range(rows)]
    columns: dict[str, Any] = {}
    for field in schema:
        if field.name == "uid":
            columns["uid"] = pa.array([batch * rows + i for i in range(rows)], pa.int64())
        elif field.name == "hour":
            columns["hour"] = pa.array(hours, pa.timestamp("us", "UTC"))
        elif pa.types.is_integer(field.type) and not field.name.startswith("wh_"):
            columns[field.name] = pa.array([1] * rows, field.type)
    return pa.table(columns)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench bronze_upkeep", description=__doc__)
    parser.add_argument("--appends", type=int, default=1500)
    parser.add_argument("--window", type=int, default=250)
    parser.add_argument("--every", type=int, default=60, help="appends between compaction rounds")
    parser.add_argument("--retention", type=int, default=5, help="the upkeep table's retention (s)")
    parser.add_argument("--rows", type=int, default=300)
    args = parser.parse_args(argv)

    from deltalake import DeltaTable

    from widehouse.catalog import load_catalog
    from widehouse.settings import DeltaSettings, load_settings
    from widehouse.stream.bronze import BronzeWriter, bronze_tables, with_partials_meta
    from widehouse.stream.upkeep import upkeep_table

    print(machine())
    catalog = load_catalog(load_settings().schemas_dir)
    rows: list[list[object]] = []
    results: dict[str, Any] = {"args": vars(args), "windows": []}
    paths: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="bench-bronze-") as root:
        for mode in ("defaults", "upkeep"):
            delta = DeltaSettings(str(Path(root) / mode), bronze_retention_seconds=args.retention)
            target = bronze_tables(catalog, delta, ("user_hourly",))["user_hourly"]
            if mode == "defaults":
                target = replace(target, properties=())
            paths[mode] = target.path
            writer = BronzeWriter()
            writer.ensure(target)
            log_dir = Path(target.path) / "_delta_log"
            wall = cpu = 0.0
            for batch in range(1, args.appends + 1):
                data = with_partials_meta(_batch(target.schema, batch, args.rows), "g001", batch)
                w0, c0 = time.perf_counter(), time.process_time()
                writer.append(target, data, "bench:g001:user_hourly", batch)
                wall += time.perf_counter() - w0
                cpu += time.process_time() - c0
                if mode == "upkeep" and batch % args.every == 0:
                    upkeep_table(target, delta.bronze_compact_files)
                if batch % args.window == 0:
                    commits = len(list(log_dir.glob("*.json")))
                    live = len(DeltaTable(target.path).file_uris())
                    row = [mode, batch, 1000 * wall / args.window, 1000 * cpu / args.window, commits, live]
                    rows.append(row)
                    results["windows"].append(dict(zip(HEADER, row, strict=True)))
                    print(table("", HEADER, [row]).splitlines()[-1], flush=True)
                    wall = cpu = 0.0
        counts = {
            mode: DeltaTable(path).to_pyarrow_table(columns=["uid"]).num_rows for mode, path in paths.items()
        }
    results["rows"] = counts
    print(table(f"\nbronze appends, {args.rows} partial rows each, one table", HEADER, rows))
    print(f"rows: {counts} ({'equal' if len(set(counts.values())) == 1 else 'DIFFERENT'})")
    print(f"\nsaved {save('bronze_upkeep', results)}")
    return 0

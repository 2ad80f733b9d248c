"""Finalize an hour of user_hourly with ~1M events' partial rows: ClickHouse merge, Delta silver, ledger.

Partial rows are written straight into ``user_hourly_partial`` of a scratch database on the running
ClickHouse service (``widehouse services up``): ``--users`` users, each with ``--batches`` partial
rows for the hour (as that many micro-batches would leave them), every count column filled so the
counts add up to ``--events``, sums / min / max filled, first / last left empty. Then, timed:

``final rows``   the hour's final rows computed by ClickHouse from the partials, as Arrow
``finalize``     the whole job step (lease, gate forced, reconciliation of the table's topics
                 against the broker, the final rows computed by ClickHouse into
                 ``user_hourly_final`` (staged), the prepared publication, the staged rows streamed
                 to Delta ``silver/user_hourly`` (delta-rs replaceWhere; the first run also starts
                 Spark to register the new table), ledger row)
``re-run``       the same again (a new version replaces the first; no Spark)

    python -m bench finalize_hour [--events 1000000] [--users 100000] [--batches 5]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from bench.common import machine, save, table


def _partials(catalog: object, events: int, users: int, batches: int, hour: dt.datetime) -> pa.Table:
    wide = catalog.table("user_hourly")  # type: ignore[attr-defined]
    rng = np.random.default_rng(7)
    n = users * batches
    uid = np.repeat(np.arange(10_000_001, 10_000_001 + users, dtype=np.int64), batches)
    columns: dict[str, pa.Array] = {
        wide.key_name: pa.array(uid),
        "hour": pa.array([hour] * n, pa.timestamp("s", tz="UTC")),
    }
    counts = [c for c in wide.columns if c.agg == "count"]
    per_row = max(1, events // (n * max(1, len(counts))))
    for column in wide.columns:
        if column.agg == "count":
            columns[column.name] = pa.array(rng.integers(0, 2 * per_row + 1, n, dtype=np.uint64))
        elif column.is_pair:
            continue
        elif column.value_type in {"long", "int"}:
            columns[column.name] = pa.array(rng.integers(0, 10_000, n, dtype=np.int64))
        elif column.value_type == "double":
            columns[column.name] = pa.array(rng.random(n) * 100)
    return pa.table(columns)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench finalize_hour", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--users", type=int, default=100_000)
    parser.add_argument("--batches", type=int, default=5)
    args = parser.parse_args(argv)

    state = Path(tempfile.mkdtemp(prefix="wh-bench-finalize-"))
    database = f"wh_bench_finalize_{os.getpid()}"
    os.environ.update(
        {
            "WIDEHOUSE_CLICKHOUSE_DATABASE": database,
            "WIDEHOUSE_DELTA_ROOT": str(state / "delta"),
            "WIDEHOUSE_TENANT_SUFFIX": f"bench{os.getpid()}",
        }
    )
    from widehouse.batch.final_rows import final_hour_rows
    from widehouse.batch.finalize import BatchContext, FinalizeRequest, finalize_hour
    from widehouse.batch.spark import DeltaSilver, batch_catalog
    from widehouse.clickhouse import connect
    from widehouse.pulsar.admin import PulsarAdmin
    from widehouse.settings import load_settings
    from widehouse.spark.session import build_session
    from widehouse.stream.tables import ensure_clickhouse

    settings = load_settings()
    catalog = batch_catalog(settings)
    hour = (dt.datetime.now(dt.UTC) - dt.timedelta(hours=3)).replace(minute=0, second=0, microsecond=0)
    client = connect(settings.clickhouse)
    rows: list[list[object]] = []
    try:
        ensure_clickhouse(client, catalog)
        data = _partials(catalog, args.events, args.users, args.batches, hour)
        started = time.perf_counter()
        for start in range(0, data.num_rows, 100_000):
            client.insert_arrow("user_hourly_partial", data.slice(start, 100_000))
        load_s = time.perf_counter() - started
        with PulsarAdmin(settings.pulsar) as admin:
            # as `widehouse finalize` builds it: Spark starts only to register a new silver table
            silver = DeltaSilver(lambda: build_session(settings, "bench-finalize"), settings.delta)
            ctx = BatchContext(client, admin, catalog, silver, settings.stream.app)
            started = time.perf_counter()
            final = final_hour_rows(client, catalog.table("user_hourly"), hour)
            rows.append(
                ["final rows (ClickHouse -> Arrow)", final.num_rows, round(time.perf_counter() - started, 2)]
            )
            for label in ("finalize (first run)", "finalize (re-run)"):
                started = time.perf_counter()
                outcome = finalize_hour(ctx, FinalizeRequest("user_hourly", hour, force=True))
                seconds = time.perf_counter() - started
                rows.append([label, outcome.published.rows, round(seconds, 2)])
                steps = ", ".join(
                    f"{k} {v:g}s" for k, v in {**outcome.seconds, **outcome.published.seconds}.items()
                )
                print(f"{label}: {steps}")
        rows.insert(0, ["load partial rows (not part of finalize)", data.num_rows, round(load_s, 2)])
        for row in rows:
            row.append(round(int(row[1]) / float(row[2])) if float(row[2]) else "")  # type: ignore[arg-type]
        print(
            table(
                f"finalize one hour of user_hourly: {args.users:,} users x {args.batches} partial rows "
                f"(~{args.events:,} events) - {machine()}",
                ["step", "rows", "seconds", "rows/s"],
                rows,
            )
        )
        save("finalize_hour", {"args": vars(args), "rows": rows})
    finally:
        client.command(f"DROP DATABASE IF EXISTS `{database}`")
        client.close()
        shutil.rmtree(state, ignore_errors=True)
    return 0

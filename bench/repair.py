"""Repair throughput: quarantined events a fixed catalog accepts, folded back in (``widehouse repair``).

A private ClickHouse database on the local service gets ``--messages`` quarantined logins of one
publish hour that the demo catalog rejects (a float ``latency_ms`` in an int field) and a catalog
copy accepts (``double``), one in ten of them still invalid there (a float ``retry``): the repair
folds the others into ``user_hourly``'s partials with that copy (no
Delta, no re-publishing: the fold, the records and the ClickHouse writes), then runs again (which
must fold nothing and record nothing new). Prints messages/s per run and the result of a check: the
partials hold exactly the valid logins (an independent count: ``sum(logins)`` of the partial table),
and the second run added no ``repairs`` row.

    python -m bench repair [--messages 200000] [--chunk-size 50000]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench.common import machine, save, table

LOGIN = "persistent://bigolive/app/login"
STRICT = "latency_ms: {type: int, range: [20, 3000]}"
HOUR = dt.datetime(2026, 11, 22, 9, tzinfo=dt.UTC)


def fixed_catalog(root: Path) -> Path:
    """A copy of the checkout's catalog (and its SQL) with ``latency_ms`` a double."""
    checkout = Path(__file__).resolve().parents[1]
    shutil.copytree(checkout / "schemas", root / "schemas")
    shutil.copytree(checkout / "sql", root / "sql")
    login = root / "schemas" / "topics" / "bigolive" / "app" / "login.yaml"
    login.write_text(login.read_text().replace(STRICT, STRICT.replace("int", "double")))
    return root / "schemas"


def quarantine(client: Any, messages: int) -> None:
    """``messages`` quarantined logins of :data:`HOUR` (50,000 users), inserted 100,000 at a time."""
    import orjson
    import pyarrow as pa

    from widehouse.contracts.tables import QUARANTINE, QUARANTINE_SHAPE

    start_ms = int(HOUR.timestamp() * 1000)
    for first in range(0, messages, 100_000):
        ids = range(first, min(messages, first + 100_000))
        payloads = [
            orjson.dumps(
                {
                    "uid": 1000 + i % 50_000,
                    "ts": start_ms + i % 3_000_000,
                    "method": "phone",
                    "result": "success",
                    "app_version": "5.40.0",
                    "latency_ms": 12.5,
                    "retry": 1.5 if i % 10 == 0 else 0,
                    "geo": {"country": "ID"},
                }
            )
            for i in ids
        ]
        n = len(payloads)
        rows = {
            "app": ["bench"] * n,
            "group": ["g001"] * n,
            "batch_id": [1] * n,
            "topic": [LOGIN] * n,
            "message_id": [f"{i}:0:0" for i in ids],
            "publish_time": [(start_ms + 3_000_000 + i % 500_000) * 1000 for i in ids],
            "reason": ["wrong_type"] * n,
            "detail": ["$.latency_ms: a double in an int field"] * n,
            "payload": payloads,
            "payload_bytes": [len(p) for p in payloads],
        }
        schema = QUARANTINE_SHAPE.arrow_schema()
        data = pa.table({f.name: pa.array(rows[f.name]).cast(f.type) for f in schema}, schema=schema)
        client.insert(QUARANTINE, data, f"bench-repair:{first}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench repair", description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--chunk-size", type=int, default=50_000)
    args = parser.parse_args(argv)
    from widehouse import clickhouse
    from widehouse.catalog import load_catalog
    from widehouse.repair.core import RepairContext, RepairRequest, repair
    from widehouse.settings import load_settings

    print(f"machine: {machine()}")
    database = f"bench_repair_{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory(prefix="bench-repair-") as tmp:
        schemas = fixed_catalog(Path(tmp))
        env = {**os.environ, "WIDEHOUSE_CLICKHOUSE_DATABASE": database, "WIDEHOUSE_SCHEMAS_DIR": str(schemas)}
        settings = load_settings(env)
        client = clickhouse.connect(settings.clickhouse)
        try:
            from widehouse.contracts.tables import QUARANTINE_SHAPE

            client.ensure_shapes([QUARANTINE_SHAPE])
            quarantine(client, args.messages)
            ctx = RepairContext(client, load_catalog(schemas), bronze=None, republish=None)
            request = RepairRequest("user_hourly", HOUR, HOUR, chunk_size=args.chunk_size, republish=False)
            runs = []
            recorded = []
            for label in ("repair", "again (nothing new)"):
                started = time.perf_counter()
                outcome = repair(ctx, request)
                seconds = time.perf_counter() - started
                runs.append((label, outcome.examined, outcome.repaired, seconds))
                recorded.append(int(client.scalar("SELECT count() FROM repairs") or 0))
            logins = client.scalar("SELECT sum(logins) FROM user_hourly_partial")
        finally:
            client.command(f"DROP DATABASE IF EXISTS {database}")
            client.close()
    rows = [(label, examined, repaired, s, examined / s if s else 0) for label, examined, repaired, s in runs]
    print(
        table(
            f"\nrepair of {args.messages:,} quarantined logins, chunks of {args.chunk_size:,}",
            ("run", "examined", "repaired", "seconds", "examined/s"),
            rows,
        )
    )
    valid = args.messages - len(range(0, args.messages, 10))
    check = "ok" if int(logins or 0) == valid else f"MISMATCH: {logins} logins in the partials, not {valid}"
    if recorded[1] != recorded[0]:
        check = f"MISMATCH: the second run recorded {recorded[1] - recorded[0]} repairs rows"
    print(f"check (sum of logins in user_hourly_partial = valid messages; nothing new recorded): {check}")
    path = save(
        "repair", {"messages": args.messages, "chunk_size": args.chunk_size, "runs": rows, "check": check}
    )
    print(f"\nsaved {path}")
    return 0 if check == "ok" else 1

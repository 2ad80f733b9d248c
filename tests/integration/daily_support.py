"""Helpers of the daily-merge integration tests: the hand-written golden fixture
(tests/golden/daily.yaml) loaded into ClickHouse partials and Hive tables, read-back of what was
published, and a private HBase Thrift server (on its own ports, against the shared HBase) that a
test may kill."""

from __future__ import annotations

import dataclasses
import datetime as dt
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import yaml

from widehouse.catalog import WideTable
from widehouse.clickhouse import ClickHouse
from widehouse.settings import LocalServicesSettings

GOLDEN = Path(__file__).parents[1] / "golden" / "daily.yaml"
UTC = dt.UTC
PAIRS = {"last_country"}  # pair columns the fixture sets ([event time, value])

HIVE_SCHEMAS = {
    "payments": "order_id string, uid bigint, pay_time timestamp, amount_usd double, currency string, "
    "channel string, product string, status string, dt string",
    "user_profile": "uid bigint, nickname string, country string, language string, gender string, "
    "birth_year int, register_time timestamp, user_level int, vip_level int, is_anchor boolean, dt string",
    "social_graph": "uid bigint, peer_uid bigint, relation string, created_time timestamp, dt string",
}


def fixture() -> dict[str, Any]:
    return yaml.safe_load(GOLDEN.read_text())


def parse_time(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=UTC)


def insert_stream(client: ClickHouse, rows: list[dict[str, Any]]) -> None:
    """The fixture's partial rows into ``user_daily_partial``, one literal INSERT each."""
    for row in rows:
        names, values = [], []
        for name, value in row.items():
            names.append(f"`{name}`")
            if name in PAIRS:
                values.append(f"(toDateTime64('{value[0]}', 3, 'UTC'), '{value[1]}')")
            elif isinstance(value, str):
                values.append(f"'{value}'")
            else:
                values.append(repr(value))
        client.command(f"INSERT INTO user_daily_partial ({', '.join(names)}) VALUES ({', '.join(values)})")


def load_hive(spark: Any, sql_dir: Path, database: str, tables: dict[str, list[dict[str, Any]]]) -> None:
    from widehouse.offline.spark import create_tables

    create_tables(spark, sql_dir, database)
    for table, rows in tables.items():
        columns = [c.split()[0] for c in HIVE_SCHEMAS[table].split(", ")]
        times = {c.split()[0] for c in HIVE_SCHEMAS[table].split(", ") if c.endswith("timestamp")}
        data = [tuple(parse_time(r[c]) if c in times else r[c] for c in columns) for r in rows]
        spark.createDataFrame(data, HIVE_SCHEMAS[table]).createOrReplaceTempView("daily_fixture")
        spark.sql(f"INSERT OVERWRITE TABLE `{database}`.`{table}` PARTITION (dt) SELECT * FROM daily_fixture")
        spark.catalog.dropTempView("daily_fixture")


def expected_rows(table: WideTable, day: dt.date, listed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The hand-written rows completed with the documented defaults (counts 0, the rest null)."""
    times = {c.name for c in table.columns if c.value_type == "timestamp-ms"}
    times |= {c.name for c in table.offline_columns if c.type == "timestamp-ms"}
    out = []
    for row in listed:
        full: dict[str, Any] = {table.key_name: row["uid"], "day": day}
        full.update({c.name: 0 if c.agg == "count" else None for c in table.columns})
        full.update({c.name: None for c in table.offline_columns})
        full.update({k: parse_time(v) if k in times else v for k, v in row.items()})
        out.append(full)
    return sorted(out, key=lambda r: r[table.key_name])


def normalise(
    rows: list[dict[str, Any]], drop: tuple[str, ...] = ("finalized_at", "wh_date")
) -> list[dict[str, Any]]:
    """Rows as plain dicts: datetimes in UTC, the bookkeeping columns dropped, sorted by uid."""
    out = []
    for row in rows:
        clean = {}
        for k, v in row.items():
            if k in drop:
                continue
            if isinstance(v, dt.datetime):
                clean[k] = v.replace(tzinfo=UTC) if v.tzinfo is None else v.astimezone(UTC)
            else:
                clean[k] = v
        out.append(clean)
    return sorted(out, key=lambda r: r["uid"])


def published(client: ClickHouse, day: dt.date) -> list[dict[str, Any]]:
    """What analysts see for the day in the ClickHouse view ``user_daily``."""
    result = client.query("SELECT * FROM user_daily WHERE day = {d:Date}", {"d": day.isoformat()})
    return normalise(list(result.named_results()))


def ledger_entries(client: ClickHouse, day: dt.date) -> int:
    """Ledger rows of ``user_daily`` for the day (0 when no run ever got as far as creating the ledger)."""
    if not client.scalar("EXISTS TABLE finalized_periods"):
        return 0
    return int(
        client.scalar(
            "SELECT count() FROM finalized_periods "
            "WHERE `table` = 'user_daily' AND toDate(period) = {d:Date}",
            {"d": day.isoformat()},
        )
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PrivateThrift:
    """An HBase Thrift (v1) server of our own, on free ports, against the shared HBase (same
    ZooKeeper): tests kill it without touching the shared one."""

    def __init__(self, local: LocalServicesSettings, state_dir: Path) -> None:
        from widehouse.services.hbase import HBaseThrift

        self.port = free_port()
        own = dataclasses.replace(
            local, state_dir=state_dir, hbase_thrift_port=self.port, hbase_thrift_info_port=free_port()
        )
        self.service = HBaseThrift(own)
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 120) -> None:
        argv = self.service.command()
        self.service.prepare()
        self.service.log_file.parent.mkdir(parents=True, exist_ok=True)
        with self.service.log_file.open("ab") as log:
            self.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=self.service.dir)
        deadline = time.monotonic() + timeout
        while True:
            try:
                if self.service.probe() is None:
                    return
            except Exception:  # not up yet: thrift/socket errors of many kinds while it starts
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"private HBase Thrift server did not start; see {self.service.log_file}")
            time.sleep(1)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)


def unpack_cell(cell: bytes) -> tuple[int, int, list[bytes | None]]:
    """A packed family cell parsed by hand from its documented layout (widehouse.hbase.packed):
    (format version, fingerprint, values with None for a null). Independent of the code under test."""
    assert cell[:2] == b"WF"
    version, fingerprint, n = cell[2], int.from_bytes(cell[4:8], "big"), int.from_bytes(cell[8:10], "big")
    bitmap = cell[10 : 10 + (n + 7) // 8]
    at = 10 + (n + 7) // 8
    offsets = [int.from_bytes(cell[at + 4 * i : at + 4 * i + 4], "big") for i in range(n + 1)]
    data = cell[at + 4 * (n + 1) :]
    assert len(data) == offsets[-1]
    values: list[bytes | None] = [
        None if bitmap[i // 8] >> (i % 8) & 1 else data[offsets[i] : offsets[i + 1]] for i in range(n)
    ]
    return version, fingerprint, values

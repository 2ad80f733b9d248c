"""The shared Hive metastore service: two Spark processes use one catalog at the same time.

The collision it removes: with Spark's in-process Derby metastore, a second Spark process (finalize
and the daily merge starting together at midnight, or an analyst beside them) cannot open the
catalog the first one holds. Here the test session's Spark and a second Spark process (a
subprocess, as a job runs) both work on the session's ``metastore`` service at once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import free_port, settings_for
from widehouse.errors import SetupError
from widehouse.settings import Settings
from widehouse.spark.session import build_session

pytestmark = [pytest.mark.integration, pytest.mark.spark]

PEER = """
import json, sys
from widehouse.settings import load_settings
from widehouse.spark.session import build_session

db = sys.argv[1]
spark = build_session(
    load_settings(),
    "widehouse-metastore-peer",
    overrides={"spark.master": "local[1]", "spark.sql.shuffle.partitions": "1", "spark.ui.enabled": "false"},
)
seen = sorted([r.uid, r.n] for r in spark.table(f"{db}.finalized").collect())
spark.sql(f"CREATE TABLE {db}.daily (uid STRING, m BIGINT) USING parquet")
spark.sql(f"INSERT INTO {db}.daily VALUES ('u1', 10), ('u3', 30)")
print("PEER " + json.dumps(seen), flush=True)
spark.stop()
"""


def test_two_spark_processes_share_one_catalog_at_once(
    spark: Any, settings: Settings, tmp_path: Path
) -> None:
    db = f"ms_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE DATABASE {db}")
    try:
        spark.sql(f"CREATE TABLE {db}.finalized (uid STRING, n BIGINT) USING parquet")
        spark.sql(f"INSERT INTO {db}.finalized VALUES ('u1', 1), ('u2', 2)")

        # a second Spark process (its own state dir, as a job of another DAG) while this one is live
        env = {**os.environ, "WIDEHOUSE_STATE_DIR": str(tmp_path / "peer")}
        peer = subprocess.Popen(
            [sys.executable, "-c", PEER, db],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            # this session keeps asking the catalog while the peer creates its table
            deadline = time.monotonic() + 240
            while not spark.catalog.tableExists(f"{db}.daily") and peer.poll() is None:
                assert time.monotonic() < deadline, "the peer never created its table"
                time.sleep(0.5)
            out, err = peer.communicate(timeout=240)
        finally:
            if peer.poll() is None:
                peer.kill()
                peer.communicate()
        assert peer.returncode == 0, err[-3000:]

        # the peer saw this session's table and rows ...
        seen = json.loads(next(line for line in out.splitlines() if line.startswith("PEER "))[5:])
        assert seen == [["u1", 1], ["u2", 2]]
        # ... and this session sees the peer's table and rows, without restarting
        rows = spark.sql(f"SELECT uid, m FROM {db}.daily ORDER BY uid").collect()
        assert [(r.uid, r.m) for r in rows] == [("u1", 10), ("u3", 30)]
        assert {r.tableName for r in spark.sql(f"SHOW TABLES IN {db}").collect()} == {"finalized", "daily"}

        # one warehouse: the server's (where its `default` database lives) is this session's, and the
        # peer's managed table lives where this session's database does
        def location(database: str) -> str:
            info = spark.sql(f"DESCRIBE DATABASE {database}").where("info_name = 'Location'").first()
            return str(info.info_value).removeprefix("file:")

        assert location("default") == settings.hive.warehouse_dir
        assert location(db) == f"{settings.hive.warehouse_dir}/{db}.db"
        detail = {r.col_name: r.data_type for r in spark.sql(f"DESCRIBE FORMATTED {db}.daily").collect()}
        assert detail["Location"].removeprefix("file:") == f"{settings.hive.warehouse_dir}/{db}.db/daily"
    finally:
        spark.sql(f"DROP DATABASE IF EXISTS {db} CASCADE")


def test_a_session_without_its_metastore_says_how_to_start_it(tmp_path: Path) -> None:
    port = free_port()
    settings = settings_for(
        tmp_path, WIDEHOUSE_HIVE_METASTORE_PORT=str(port), WIDEHOUSE_HIVE_WAREHOUSE=str(tmp_path / "wh")
    )
    with pytest.raises(
        SetupError, match=rf"thrift://127\.0\.0\.1:{port} is not answering.*widehouse services up"
    ):
        build_session(settings, "no-metastore")

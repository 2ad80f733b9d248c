"""A client configured for a ClickHouse cluster sends the settings that keep the idempotency records
exact across replicas, and the real engine accepts them: quorum inserts (``insert_quorum='auto'``,
``insert_quorum_parallel=0``) for the records only, synchronous Distributed inserts for every
insert, sequentially consistent reads where asked for, and token deduplication unchanged.

The local ClickHouse service is one node (its guard refuses ON CLUSTER and replicated engines), so
the tables here are plain MergeTree tables named like the records; each carries columns whose
DEFAULT is ``getSetting(...)``, evaluated by the engine in the insert's own context: the row
records what the insert was sent with. What a replicated server does with these settings is
ClickHouse's documented behaviour (the argument is in the notes of issue 27).
"""

from __future__ import annotations

import datetime as dt
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

from tests.conftest import settings_for
from widehouse import clickhouse
from widehouse.batch import ledger
from widehouse.batch.lease import acquire
from widehouse.clickhouse import ClickHouse
from widehouse.contracts.tables import (
    BATCH_SHAPES,
    IDEMPOTENCY_RECORDS,
    LEDGER,
    QUARANTINE,
    STREAM_SHAPES,
)
from widehouse.settings import Settings
from widehouse.stream import commits
from widehouse.stream.commits import ClickHouseLedger

pytestmark = [pytest.mark.integration]

_SEEN = (
    "`quorum` String DEFAULT toString(getSetting('insert_quorum')), "
    "`parallel` String DEFAULT toString(getSetting('insert_quorum_parallel')), "
    "`foreground` String DEFAULT toString(getSetting('distributed_foreground_insert'))"
)


@pytest.fixture
def clients(services: Settings) -> Iterator[tuple[ClickHouse, ClickHouse]]:
    """(one-server client, cluster-configured client) on a fresh database of the local service."""
    database = f"it_cluster_{uuid.uuid4().hex[:8]}"
    plain = clickhouse.connect(
        settings_for(services.state_dir, WIDEHOUSE_CLICKHOUSE_DATABASE=database).clickhouse
    )
    clustered_settings = settings_for(
        services.state_dir, WIDEHOUSE_CLICKHOUSE_DATABASE=database, WIDEHOUSE_CLICKHOUSE_CLUSTER="wh_prod"
    ).clickhouse
    clustered = clickhouse.connect(clustered_settings, create_database=False)  # no ON CLUSTER here
    for name in (LEDGER, QUARANTINE):
        plain.command(
            f"CREATE TABLE `{name}` (`k` String, {_SEEN}) ENGINE = MergeTree ORDER BY k "
            "SETTINGS non_replicated_deduplication_window = 100"
        )
    yield plain, clustered
    plain.command(f"DROP DATABASE IF EXISTS `{database}`")
    plain.close()
    clustered.close()


def _rows(client: ClickHouse, table: str) -> list[tuple[str, ...]]:
    return [
        tuple(map(str, r))
        for r in client.rows(f"SELECT k, quorum, parallel, foreground FROM `{table}` ORDER BY k")
    ]


def test_records_are_quorum_inserts_and_replays_still_deduplicate(
    clients: tuple[ClickHouse, ClickHouse],
) -> None:
    plain, clustered = clients
    assert clustered.cluster == "wh_prod" and plain.cluster is None
    data = pa.table({"k": ["a", "b"]})
    assert clustered.insert(LEDGER, data, "ledger:t:1") == 2
    clustered.insert(LEDGER, data, "ledger:t:1")  # a replay: the token drops it
    clustered.insert(QUARANTINE, pa.table({"k": ["q"]}), "quarantine:g:1")
    plain.insert(QUARANTINE, pa.table({"k": ["p"]}), "quarantine:g:2")
    assert _rows(plain, LEDGER) == [("a", "auto", "false", "true"), ("b", "auto", "false", "true")]
    # not a record: no quorum, but a synchronous Distributed insert; one server: neither
    assert _rows(plain, QUARANTINE) == [("p", "0", "true", "false"), ("q", "0", "true", "true")]


def test_consistent_reads_are_sequentially_consistent_only_on_a_cluster(
    clients: tuple[ClickHouse, ClickHouse],
) -> None:
    plain, clustered = clients
    ask = "SELECT getSetting('select_sequential_consistency')"
    assert int(clustered.scalar(ask, consistent=True)) == 1
    assert int(clustered.scalar(ask)) == 0
    assert int(plain.scalar(ask, consistent=True)) == 0
    clustered.insert(LEDGER, pa.table({"k": ["x"]}), "ledger:t:2")
    assert clustered.rows(f"SELECT k FROM `{LEDGER}`", consistent=True) == [("x",)]


class _Recording:
    """The real clickhouse-connect driver, recording the settings each query was sent with."""

    def __init__(self, driver: Any) -> None:
        self._driver = driver
        self.queries: list[tuple[str, dict[str, Any]]] = []

    def query(self, query: str, parameters: Any = None, settings: dict[str, Any] | None = None) -> Any:
        self.queries.append((query, dict(settings or {})))
        return self._driver.query(query, parameters=parameters, settings=settings)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._driver, name)


def test_every_read_of_an_idempotency_record_is_sequentially_consistent(
    clients: tuple[ClickHouse, ClickHouse],
) -> None:
    plain, clustered = clients
    plain.drop([LEDGER, QUARANTINE])
    plain.ensure_shapes([*STREAM_SHAPES, *BATCH_SHAPES])  # one server: the guard refuses ON CLUSTER
    recording = _Recording(clustered.driver)
    clustered.driver = recording
    hour = dt.datetime(2026, 11, 22, 9, tzinfo=dt.UTC)
    # the batch jobs: a publish lease, then the ledger's and the publications' reads
    with acquire(clustered, "user_hourly", hour, "run-1"):
        ledger.next_version(clustered, "user_hourly", hour)
        ledger.pending(clustered, "user_hourly", hour)
        ledger.last_entry(clustered, "user_hourly", hour)
        ledger.missing_hours(clustered, "user_hourly", hour.date())
    # the stream's ClickHouse sink: the last committed batch and the marks of a cut-short one
    sink = ClickHouseLedger(lambda: clustered, "app", "g1")
    assert sink.begin(1) is True
    assert commits.last_written(clustered, "app", "g1") is None
    records = [
        (sql, settings)
        for sql, settings in recording.queries
        if any(re.search(rf"\b{name}\b", sql) for name in IDEMPOTENCY_RECORDS)
    ]
    assert len(records) >= 9
    assert [sql for sql, settings in records if settings.get("select_sequential_consistency") != 1] == []

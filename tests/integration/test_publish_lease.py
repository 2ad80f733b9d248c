"""The publish lease (one publisher per (table, period)) against the real ClickHouse service.

Each test works in its own database. What is proven: of concurrent claims exactly one wins and the
others are told who holds the period; a released, expired, or dead (SIGKILLed process on this
host) holder is replaced by the next generation; a waiting claim gets the lease once it is free.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import settings_for
from widehouse import clickhouse
from widehouse.batch import lease as leases
from widehouse.batch.lease import PeriodBusyError, acquire
from widehouse.contracts.tables import LEASES
from widehouse.settings import Settings

pytestmark = [pytest.mark.integration]

HOUR = dt.datetime(2026, 11, 22, 9, tzinfo=dt.UTC)


@pytest.fixture
def scratch(services: Settings) -> Iterator[Settings]:
    settings = settings_for(
        services.state_dir, WIDEHOUSE_CLICKHOUSE_DATABASE=f"it_lease_{uuid.uuid4().hex[:8]}"
    )
    client = clickhouse.connect(settings.clickhouse)
    leases.ensure(client)
    yield settings
    client.command(f"DROP DATABASE IF EXISTS `{client.database}`")
    client.close()


def _generations(settings: Settings) -> list[tuple[Any, ...]]:
    client = clickhouse.connect(settings.clickhouse)
    try:
        return client.rows(
            f"SELECT generation, holder FROM {LEASES} WHERE event = 'claim' ORDER BY generation"
        )
    finally:
        client.close()


def test_of_concurrent_claims_exactly_one_wins(scratch: Settings) -> None:
    barrier = threading.Barrier(6)
    won: list[str] = []
    refused: list[str] = []

    def claim(holder: str) -> None:
        client = clickhouse.connect(scratch.clickhouse)
        try:
            barrier.wait()
            try:
                acquire(client, "user_hourly", HOUR, holder)
                won.append(holder)
            except PeriodBusyError as exc:
                refused.append(str(exc))
        finally:
            client.close()

    threads = [threading.Thread(target=claim, args=(f"run{i}",)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(won) == 1 and len(refused) == 5
    assert all(
        f"period 2026-11-22T09:00Z of user_hourly is being published by run {won[0]}" in m for m in refused
    )
    assert _generations(scratch) == [(1, won[0])]  # one claim row survived


def test_released_expired_and_dead_holders_are_replaced(scratch: Settings) -> None:
    client = clickhouse.connect(scratch.clickhouse)
    try:
        first = acquire(client, "user_hourly", HOUR, "a")
        assert acquire(client, "user_hourly", HOUR, "a").generation == 1  # re-entrant
        first.release()
        second = acquire(client, "user_hourly", HOUR, "b", ttl=dt.timedelta(milliseconds=400))
        assert second.generation == 2
        with pytest.raises(PeriodBusyError, match="by run b"):
            acquire(client, "user_hourly", HOUR, "c")
        third = acquire(client, "user_hourly", HOUR, "c", wait=5)  # b's lease expires meanwhile
        assert third.generation == 3
        with pytest.raises(PeriodBusyError, match="run b lost its publish lease"):
            second.check()
        third.release()
        # a holder killed without releasing (same host, dead pid) is taken over at once
        code = (
            "import datetime as dt, os\n"
            "from widehouse import clickhouse\nfrom widehouse.settings import load_settings\n"
            "from widehouse.batch.lease import acquire\n"
            "c = clickhouse.connect(load_settings().clickhouse)\n"
            "acquire(c, 'user_hourly', dt.datetime(2026, 11, 22, 9, tzinfo=dt.UTC), 'doomed')\n"
            "os._exit(0)\n"
        )
        env = {"WIDEHOUSE_CLICKHOUSE_DATABASE": client.database}
        done = subprocess.run(
            [sys.executable, "-c", code], env={**os.environ, **env}, timeout=60, check=False
        )
        assert done.returncode == 0
        fourth = acquire(client, "user_hourly", HOUR, "d")
        assert fourth.generation == 5
        assert [h for _, h in _generations(scratch)] == ["a", "b", "c", "doomed", "d"]
        # another period of the same table is independent
        assert acquire(client, "user_hourly", HOUR + dt.timedelta(hours=1), "e").generation == 1
    finally:
        client.close()


def test_a_waiting_claim_gets_the_lease_when_the_holder_releases(scratch: Settings) -> None:
    client = clickhouse.connect(scratch.clickhouse)
    other = clickhouse.connect(scratch.clickhouse)
    try:
        held = acquire(client, "user_daily", HOUR.replace(hour=0), "daily-run")
        timer = threading.Timer(0.7, held.release)
        timer.start()
        waited = acquire(other, "user_daily", HOUR.replace(hour=0), "hbase-refresh", wait=10)
        timer.join()
        assert (waited.generation, waited.holder) == (2, "hbase-refresh")
    finally:
        client.close()
        other.close()

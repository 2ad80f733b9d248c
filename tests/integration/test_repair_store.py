"""The repair's records against the real ClickHouse service, from hand-written rows in a private
database: which chunks are cut short, which published periods a repair touched after their newest
publication (hours, and days for a daily table), and what the reconciliation counts as repaired."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import settings_for
from widehouse import clickhouse
from widehouse.batch import ledger
from widehouse.batch.reconcile import repaired_side
from widehouse.contracts.tables import LEDGER, LEDGER_SHAPE
from widehouse.repair import store
from widehouse.settings import Settings

pytestmark = pytest.mark.integration

UTC = dt.UTC
H9 = dt.datetime(2026, 11, 22, 9, tzinfo=UTC)
HOUR = dt.timedelta(hours=1)
A = "persistent://bigolive/app/login"


@pytest.fixture(scope="module")
def client(services: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    database = f"it_repair_{uuid.uuid4().hex[:8]}"
    settings = settings_for(tmp_path_factory.mktemp("repair"), WIDEHOUSE_CLICKHOUSE_DATABASE=database)
    c = clickhouse.connect(settings.clickhouse)
    ledger.ensure(c)
    yield c
    c.command(f"DROP DATABASE IF EXISTS {database}")
    c.close()


def _published(c: Any, table: str, period: dt.datetime, at: dt.datetime) -> None:
    row = {
        "table": table,
        "period": period,
        "finalized_at": at,
        "run_id": "r",
        "kind": "hour",
        "rows": 1,
        "forced": False,
        "include_late": False,
        "late_rows": 0,
        "reconciliation": "ok",
        "note": "",
    }
    ledger.record(c, [row], LEDGER_SHAPE, f"{LEDGER}:{table}:{period}:{at}")


def _claimed(c: Any, table: str, chunk: int, ids: list[str], outcome: str = "repaired") -> None:
    rows = [
        {
            "table": table,
            "topic": A,
            "message_id": m,
            "publish_time": H9 + dt.timedelta(minutes=5),
            "outcome": outcome,
            "reason": "" if outcome == "repaired" else "wrong_type",
            "detail": "",
            "chunk": chunk,
            "run_id": "r",
            "at": H9 + 3 * HOUR,
        }
        for m in ids
    ]
    store.record_outcomes(c, rows, f"t:{table}:{chunk}:{outcome}:{ids[0]}")


def _done(c: Any, table: str, chunk: int, hours: list[dt.datetime], at: dt.datetime) -> None:
    rows = [
        {"table": table, "chunk": chunk, "hour": h, "rows": 2, "run_id": "r", "done_at": at} for h in hours
    ]
    store.record_done(c, rows, f"t:{table}:{chunk}:done")


def test_chunks_cut_short_and_the_next_number(client: Any) -> None:
    _claimed(client, "t_chunks", 1, ["1:1:0", "1:2:0"])
    _claimed(client, "t_chunks", 2, ["1:3:0"])
    _claimed(client, "t_chunks", 0, ["1:4:0"], outcome="invalid")  # an outcome, not a chunk
    _done(client, "t_chunks", 1, [H9], H9 + 4 * HOUR)
    assert store.pending_chunks(client, "t_chunks") == [2]
    assert store.last_chunk(client, "t_chunks") == 2
    assert store.last_chunk(client, "nothing_yet") == 0
    assert store.last_outcomes(client, "t_chunks", [(A, "1:4:0"), (A, "1:1:0")]) == {
        (A, "1:4:0"): "wrong_type|"
    }


def test_the_reconciliation_counts_only_done_chunks_of_its_table(client: Any) -> None:
    _claimed(client, "t_rec", 1, ["2:1:0", "2:2:0"])
    _claimed(client, "t_rec", 2, ["2:3:0"])  # claimed, cut short: not yet valid
    _claimed(client, "t_other", 1, ["2:4:0"])
    _done(client, "t_rec", 1, [H9], H9 + 4 * HOUR)
    _done(client, "t_other", 1, [H9], H9 + 4 * HOUR)
    assert repaired_side(client, "t_rec", H9) == {A: 2}
    assert repaired_side(client, "t_rec", H9 + HOUR) == {}


def test_published_periods_touched_after_their_publication(client: Any) -> None:
    h10, h11, h12 = H9 + HOUR, H9 + 2 * HOUR, H9 + 3 * HOUR
    _published(client, "t_hours", H9, H9 + 2 * HOUR)  # published before the repair: again
    _published(client, "t_hours", h10, H9 + 2 * HOUR)
    _published(client, "t_hours", h10, H9 + 9 * HOUR)  # re-published after it: done
    _published(client, "t_hours", h12, H9 + 2 * HOUR)  # not touched
    _done(client, "t_hours", 1, [H9, h10, h11], H9 + 5 * HOUR)  # h11: never published, left alone
    assert store.periods_to_republish(client, "t_hours", "hour") == [H9]

    day = dt.datetime(2026, 11, 22, tzinfo=UTC)
    _published(client, "t_days", day, H9 + 20 * HOUR)
    _published(client, "t_days", day - 24 * HOUR, H9)
    _done(client, "t_days", 1, [H9, h12], H9 + 30 * HOUR)  # two hours of one published day
    _done(client, "t_days", 2, [day - 20 * HOUR], H9 - HOUR)  # before that day's publication
    assert store.periods_to_republish(client, "t_days", "day") == [day]

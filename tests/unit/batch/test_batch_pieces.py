"""Pure pieces of the batch layer: the gate's verdict, reconciliation verdicts, casts."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa

from widehouse.batch.gate import Gate
from widehouse.batch.publish import _cast
from widehouse.batch.reconcile import Reconciliation, TopicCheck

UTC = dt.UTC
H9 = dt.datetime(2026, 11, 22, 9, tzinfo=UTC)


def test_gate_needs_every_group_past_the_mark() -> None:
    needed = H9 + dt.timedelta(hours=2)
    ready = Gate("user_hourly", H9, needed, {"g1": needed, "g2": needed + dt.timedelta(minutes=5)})
    assert ready.ready and "every feeding group" in ready.message
    behind = Gate(
        "user_hourly", H9, needed, {"g1": needed, "g2": needed - dt.timedelta(seconds=1), "g3": None}
    )
    assert not behind.ready and set(behind.lagging) == {"g2", "g3"}
    assert "g2 at 2026-11-22T10:59:59+00:00" in behind.message and "g3 at nothing committed" in behind.message
    assert not Gate("user_hourly", H9, needed, {}).ready  # no group at all: never final


def test_reconciliation_verdicts_by_hand() -> None:
    ok = TopicCheck("t/a", broker=10, counted_in=10, valid=7, quarantined=2, late=1)
    missing = TopicCheck("t/b", broker=11, counted_in=10, valid=10, quarantined=0, late=0)
    extra = TopicCheck("t/c", broker=9, counted_in=10, valid=10, quarantined=0, late=0)
    unaccounted = TopicCheck("t/d", broker=5, counted_in=5, valid=3, quarantined=1, late=0)
    assert ok.ok and not missing.ok and not extra.ok and not unaccounted.ok
    assert missing.problems == ["1 message(s) on the broker the stream did not count"]
    assert extra.problems == ["the stream counted 1 message(s) more than the broker holds"]
    assert unaccounted.problems == ["counted in 5 != valid 3 + quarantined 1 + late 0 = 4"]
    rec = Reconciliation("user_hourly", H9, (ok, missing))
    rows = rec.rows("run1", accept=False, checked_at=H9)
    assert [(r["topic"], r["status"]) for r in rows] == [("t/a", "ok"), ("t/b", "mismatch")]
    accepted = rec.rows("run1", accept=True, checked_at=H9)
    assert [r["status"] for r in accepted] == ["ok", "accepted"]
    assert "t/b: 1 message(s) on the broker" in rec.summary()


def test_clickhouse_integer_times_are_read_as_epoch_seconds_and_days() -> None:
    seconds = pa.chunked_array([pa.array([1_795_338_000], pa.uint32())])  # 2026-11-22T09:00:00Z
    assert _cast(seconds, pa.timestamp("us", tz="UTC")).to_pylist() == [H9]
    days = pa.chunked_array([pa.array([20_414], pa.uint16())])  # 2025-11-22 is day 20,414 of the epoch
    assert _cast(days, pa.date32()).to_pylist() == [dt.date(2025, 11, 22)]

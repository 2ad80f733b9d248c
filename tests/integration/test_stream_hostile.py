"""Hostile messages through real Pulsar and the streaming job: the stream goes on (hardening issue, item 1).

A hostile producer's bag of messages (a value nested 1,000 levels deep in a summed field, a string
past the payload limit, NaN / Infinity tokens, a lone surrogate, 2**70 in a long field, duplicate
keys, raw non-UTF-8 bytes, an empty payload) is published to the purchase topic between valid events
whose wide-row values are written here by hand. The job runs as a user runs it (``--available-now``)
and must finish; ClickHouse must hold the hand-written sums and counts, every bad message must be in
quarantine exactly once with its hand-written reason, and the topic's counts must reconcile.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.stream_support import Deployment
from widehouse.contracts.periods import DAY_MS, HOUR_MS
from widehouse.contracts.tables import LATE, PROGRESS, QUARANTINE
from widehouse.settings import Settings

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]

PURCHASE = "persistent://bigolive/commerce/purchase"


def _event(uid: int, ts: int, amount: float, status: str = "success", channel: str = "card") -> bytes:
    return json.dumps(
        {"uid": uid, "ts": ts, "amount_usd": amount, "status": status, "channel": channel, "diamonds": 60}
    ).encode()


def test_hostile_messages_are_quarantined_once_and_every_valid_event_lands(
    services: Settings, tmp_path: Path
) -> None:
    now = int(time.time() * 1000)
    hour = (now - 120_000) - (now - 120_000) % HOUR_MS
    base = max(hour, now - 50 * 60_000)  # every event in one hour, on time (lateness 1 h), in the past
    t = [base + i * 1000 for i in range(10)]
    deep = b'{"uid": 5, "ts": %d, "status": "success", "amount_usd": %s}' % (t[2], b"[" * 1000 + b"]" * 1000)
    huge = b'{"uid": 5, "ts": %d, "order_id": "%s"}' % (t[2], b"x" * 70_000)
    valid = [
        _event(5, t[1], 4.99),
        _event(5, t[3], 0.99, channel="wallet"),
        _event(6, t[5], 14.99, channel="google_play"),
        # duplicate keys, the valid value last: orjson keeps the last, a valid event of 29.99
        b'{"uid": 6, "ts": %d, "amount_usd": "oops", "status": "success", "channel": "app_store", '
        b'"amount_usd": 29.99}' % t[8],
        _event(6, t[9], 99.99, status="failed"),  # a failure; still the last channel (card)
    ]
    bad = {  # payload -> the reason, by hand
        deep: "wrong_type",
        huge: "oversize",
        b'{"uid": 5, "ts": %d, "status": "success", "amount_usd": NaN}' % t[2]: "malformed_json",
        b'{"uid": 5, "ts": %d, "status": "success", "amount_usd": Infinity}' % t[2]: "malformed_json",
        b'{"uid": 5, "ts": %d, "order_id": "\\ud800"}' % t[2]: "malformed_json",  # a lone surrogate
        b'{"uid": 5, "ts": %d, "diamonds": %d}' % (t[2], 2**70): "wrong_type",  # a float to orjson
        b'{"uid": 5, "ts": %d, "status": "success", "status": 7}' % t[2]: "wrong_type",  # duplicate key
        b'{"uid": 5, "ts": %d, "order_id": "\xff\xfe"}' % t[2]: "invalid_utf8",
        b"": "empty_payload",
    }
    order = [valid[0], deep, valid[1], huge, *list(bad)[2:5], valid[2], *list(bad)[5:], *valid[3:]]
    assert len(order) == len(valid) + len(bad) == 14

    deployment = Deployment(tmp_path)
    ids = deployment.publish_messages((PURCHASE, "5", payload, None) for payload in order)
    assert len(set(ids)) == len(order)
    topic = next(name for name, origin in deployment.topic_origins.items() if origin == PURCHASE)
    deployment.plan_groups(1, topics=[topic])

    run = deployment.stream()
    assert run.returncode == 0, run.stdout[-5000:]

    # every valid event landed: the purchase columns, by hand
    day = hour - hour % DAY_MS
    hourly = deployment.clickhouse_rows("user_hourly")
    assert set(hourly) == {(5, hour), (6, hour)}
    daily = deployment.clickhouse_rows("user_daily")
    assert set(daily) == {(5, day), (6, day)}
    want = {
        5: {"recharges": 2, "recharge_usd": 5.98, "max_recharge_usd": 4.99, "recharge_failures": 0},
        6: {"recharges": 2, "recharge_usd": 44.98, "max_recharge_usd": 29.99, "recharge_failures": 1},
    }
    last_channel = {5: "wallet", 6: "card"}
    first_recharge = {5: t[1], 6: t[5]}
    for uid, columns in want.items():
        for row in (hourly[(uid, hour)], daily[(uid, day)]):
            assert {c: row[c] for c in columns} == pytest.approx(columns), uid
            assert _value(row["last_pay_channel"]) == last_channel[uid]
        assert _value(daily[(uid, day)]["first_recharge_at"]) == first_recharge[uid]

    # every bad message is in quarantine exactly once, with its reason
    quarantined = deployment.clickhouse(
        f"SELECT hex(payload) AS payload, payload_bytes, reason, message_id FROM {QUARANTINE}"
    )
    got = sorted((bytes.fromhex(r["payload"]), r["payload_bytes"], r["reason"]) for r in quarantined)
    assert got == sorted((p[:4096], len(p), reason) for p, reason in bad.items())
    assert len({r["message_id"] for r in quarantined}) == len(bad)
    assert deployment.clickhouse(f"SELECT count() AS n FROM {LATE}") == [{"n": 0}]

    # the topic's counts reconcile: in = good + bad + late
    progress = deployment.clickhouse(
        "SELECT sum(rows_in) AS rows_in, sum(rows_out) AS rows_out, sum(bad) AS bad, sum(late) AS late "
        f"FROM {PROGRESS} FINAL WHERE topic = '{topic}'"
    )
    assert progress == [{"rows_in": 14, "rows_out": 5, "bad": 9, "late": 0}]


def _value(cell: Any) -> Any:
    """A first/last cell as the merged view returns it (a bare value, or a (time, value) pair)."""
    return cell[1] if isinstance(cell, list) else cell

"""Sums that would leave their type's range: quarantined with reason ``overflow``, never a crash or a wrap.

In one input partition the transform quarantines the *event* whose contribution would overflow; across
partitions :func:`widehouse.stream.merge.settle` quarantines the *partial sum* that would overflow the
merge of its (key, hour). Either way the rest of the batch proceeds and nothing accepted is lost: what
is left out of a wide row is in the quarantine, with its value.
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from widehouse.catalog import QUARANTINE_REASONS, Catalog, load_catalog
from widehouse.contracts.periods import HOUR_MS
from widehouse.stream import merge
from widehouse.stream.output import output_schema
from widehouse.stream.plan import TransformPlan
from widehouse.stream.transform import transform

ROOT = Path(__file__).parents[3]
GIFT = "persistent://bigolive/live/gift_send"
PURCHASE = "persistent://bigolive/commerce/purchase"
HOUR = 1_700_002_800_000 - 1_700_002_800_000 % HOUR_MS
HOUR_DT = dt.datetime.fromtimestamp(HOUR / 1000, dt.UTC)
INT64_MAX = 2**63 - 1
BIG = 2**62


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog(ROOT / "schemas")


@pytest.fixture(scope="module")
def plan(catalog: Catalog) -> TransformPlan:
    return TransformPlan.for_topics(catalog, [GIFT, PURCHASE])


def gift(diamonds: int, minute: int = 0, uid: int = 7) -> dict[str, Any]:
    return {"uid": uid, "ts": HOUR + minute * 60_000, "gift": {"diamonds": diamonds}}


def purchase(amount: float, minute: int = 0, uid: int = 7) -> dict[str, Any]:
    return {"uid": uid, "ts": HOUR + minute * 60_000, "amount_usd": amount, "status": "success"}


def source_batch(topic: str, events: list[dict[str, Any]], first_id: int = 0) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "value": pa.array([orjson.dumps(e) for e in events], pa.binary()),
            "__topic": [topic] * len(events),
            "__messageId": [f"{first_id + i}:0:0" for i in range(len(events))],
            "__publishTime": pa.array(
                [(e["ts"] + 1_000) * 1000 for e in events], pa.timestamp("us", tz="UTC")
            ),
        }
    )


def run(plan: TransformPlan, partitions: list[pa.RecordBatch]) -> pa.Table:
    """One transform call per input partition, outputs concatenated, as the driver collects them."""
    outputs = []
    for part in partitions:
        outputs += list(transform(iter([part]), plan))
    return pa.Table.from_batches(outputs, schema=output_schema(plan))


def quarantined(out: pa.Table) -> list[tuple[str, str, str]]:
    rows = merge.side(out, "quarantine", "t", "g", 0).to_pylist()
    return [(r["topic"], r["message_id"], r["reason"]) for r in rows]


def row_of(plan: TransformPlan, out: pa.Table, table: str, uid: int = 7) -> dict[str, Any]:
    rows = [r for r in merge.partials(out, plan, table).to_pylist() if r["uid"] == uid]
    assert len(rows) == 1, rows
    return rows[0]


def test_overflow_is_a_quarantine_reason() -> None:
    assert "overflow" in QUARANTINE_REASONS


def test_an_event_that_would_overflow_a_sum_in_its_partition_is_quarantined(plan: TransformPlan) -> None:
    out = run(plan, [source_batch(GIFT, [gift(BIG), gift(BIG, minute=1)])])
    assert quarantined(out) == [(GIFT, "1:0:0", "overflow")]
    detail = merge.side(out, "quarantine", "t", "g", 0)["detail"][0].as_py()
    assert GIFT in detail
    assert "user_hourly.gift_diamonds_sent" in detail
    assert str(BIG) in detail
    for table in ("user_hourly", "user_daily"):
        row = row_of(plan, out, table)
        # the quarantined event is not folded at all: neither its sum nor its count
        assert (row["gift_diamonds_sent"], row["max_gift_diamonds"], row["gifts_sent"]) == (BIG, BIG, 1)
    stats = merge.topic_stats(out)[GIFT]
    assert (stats.rows_in, stats.good, stats.bad) == (2, 1, 1)


def test_the_rest_of_the_batch_proceeds(plan: TransformPlan) -> None:
    events = [gift(BIG), gift(BIG, minute=1), gift(5, minute=2), gift(-3, minute=3), gift(10, uid=8)]
    out = run(plan, [source_batch(GIFT, events)])
    assert quarantined(out) == [(GIFT, "1:0:0", "overflow")]
    assert row_of(plan, out, "user_hourly")["gift_diamonds_sent"] == BIG + 2
    assert row_of(plan, out, "user_hourly", uid=8)["gift_diamonds_sent"] == 10


def test_a_negative_overflow_is_quarantined_too(plan: TransformPlan) -> None:
    out = run(plan, [source_batch(GIFT, [gift(-(2**63)), gift(-1, minute=1)])])
    assert quarantined(out) == [(GIFT, "1:0:0", "overflow")]
    assert row_of(plan, out, "user_hourly")["gift_diamonds_sent"] == -(2**63)


def test_partials_that_would_overflow_their_merge_are_quarantined_not_wrapped(plan: TransformPlan) -> None:
    out = run(plan, [source_batch(GIFT, [gift(BIG)]), source_batch(GIFT, [gift(BIG, minute=1)], first_id=1)])
    assert quarantined(out) == [], "each partition alone is in range"
    settled = merge.settle(out, plan)
    rows = merge.side(settled, "quarantine", "t", "g", 0).to_pylist()
    assert [(r["topic"], r["reason"]) for r in rows] == [(GIFT, "overflow")] * 2  # one per wide table
    assert sorted(r["message_id"] for r in rows) == [
        f"merge:user_daily.gift_diamonds_sent:7@{HOUR_DT.isoformat()}#0",
        f"merge:user_hourly.gift_diamonds_sent:7@{HOUR_DT.isoformat()}#0",
    ]
    payloads = sorted((orjson.loads(r["payload"]) for r in rows), key=lambda p: p["table"])
    assert payloads == [
        {"table": t, "column": "gift_diamonds_sent", "key": 7, "hour": HOUR, "value": BIG}
        for t in ("user_daily", "user_hourly")
    ]
    assert all(str(BIG) in r["detail"] and str(2 * BIG) in r["detail"] for r in rows)
    for table in ("user_hourly", "user_daily"):
        row = row_of(plan, settled, table)
        # only the overflowing partial sum is left out: the other columns merge both partitions
        assert (row["gift_diamonds_sent"], row["max_gift_diamonds"], row["gifts_sent"]) == (BIG, BIG, 2)


def test_merge_alone_never_wraps_or_raises(plan: TransformPlan) -> None:
    out = run(plan, [source_batch(GIFT, [gift(BIG)]), source_batch(GIFT, [gift(BIG, minute=1)], first_id=1)])
    row = row_of(plan, out, "user_hourly")  # not settled: the overflowing partial is left out, not wrapped
    assert (row["gift_diamonds_sent"], row["gifts_sent"]) == (BIG, 2)


def test_partials_whose_total_is_in_range_merge_exactly(plan: TransformPlan) -> None:
    parts = [
        source_batch(GIFT, [gift(BIG)]),
        source_batch(GIFT, [gift(BIG, minute=1)], first_id=1),
        source_batch(GIFT, [gift(-BIG, minute=2)], first_id=2),
    ]
    settled = merge.settle(run(plan, parts), plan)
    assert quarantined(settled) == []
    assert row_of(plan, settled, "user_hourly")["gift_diamonds_sent"] == BIG


def test_a_double_sum_never_becomes_infinite(plan: TransformPlan) -> None:
    out = run(plan, [source_batch(PURCHASE, [purchase(1.7e308), purchase(1.7e308, minute=1)])])
    assert quarantined(out) == [(PURCHASE, "1:0:0", "overflow")]
    assert row_of(plan, out, "user_hourly")["recharge_usd"] == 1.7e308

    parts = [source_batch(PURCHASE, [purchase(1.7e308)]), source_batch(PURCHASE, [purchase(1.7e308)], 1)]
    settled = merge.settle(run(plan, parts), plan)
    assert [r[2] for r in quarantined(settled)] == ["overflow", "overflow"]
    assert row_of(plan, settled, "user_hourly")["recharge_usd"] == 1.7e308
    assert row_of(plan, run(plan, parts), "user_hourly")["recharge_usd"] == 1.7e308


def _left_out(settled: pa.Table, column: str) -> list[Any]:
    """Values of ``column`` that are in the quarantine: events' (from the payload) and partial sums'."""
    rows = settled.filter(pc.equal(settled["wh_kind"], "quarantine")).to_pylist()
    values = []
    for row in rows:
        assert row["wh_reason"] == "overflow", row
        payload = orjson.loads(row["wh_payload"])
        if row["wh_message_id"].startswith("merge:"):
            if payload["table"] == "user_hourly" and payload["column"] == column:
                values.append(payload["value"])
        else:
            values.append(
                payload["gift"]["diamonds"] if column == "gift_diamonds_sent" else payload["amount_usd"]
            )
    return values


def settled_in_batches(
    plan: TransformPlan, topic: str, events: list[dict[str, Any]], cuts: list[int]
) -> pa.Table:
    """``events`` of ``topic`` cut into micro-batches at ``cuts``, transformed batch by batch and the
    partials merged (:func:`merge.settle`)."""
    bounds = sorted({0, len(events), *(min(c, len(events)) for c in cuts)})
    parts = [source_batch(topic, events[a:b], first_id=a) for a, b in itertools.pairwise(bounds)]
    return merge.settle(run(plan, parts), plan)


INT64 = st.integers(min_value=-(2**63), max_value=INT64_MAX)
EDGES = st.sampled_from([BIG, -BIG, INT64_MAX, -(2**63), 2**63 // 3, 1, -1, 0])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    values=st.lists(st.one_of(INT64, EDGES), min_size=1, max_size=12),
    cuts=st.lists(st.integers(min_value=0, max_value=12), max_size=4),
)
def test_long_sums_never_raise_wrap_or_lose_a_value(
    plan: TransformPlan, values: list[int], cuts: list[int]
) -> None:
    settled = settled_in_batches(plan, GIFT, [gift(v, minute=i) for i, v in enumerate(values)], cuts)
    merged = row_of(plan, settled, "user_hourly")["gift_diamonds_sent"]
    left_out = _left_out(settled, "gift_diamonds_sent")
    assert merged is None or -(2**63) <= merged <= INT64_MAX
    # nothing wraps and nothing is lost: what the row holds plus what was quarantined is the exact total
    assert (merged or 0) + sum(left_out) == sum(values)


FLOATS = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([1.7e308, -1.7e308, 1e308, 0.5, -0.0]),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    values=st.lists(FLOATS, min_size=1, max_size=12),
    cuts=st.lists(st.integers(min_value=0, max_value=12), max_size=4),
)
def test_double_sums_never_raise_or_become_infinite(
    plan: TransformPlan, values: list[float], cuts: list[int]
) -> None:
    settled = settled_in_batches(plan, PURCHASE, [purchase(v, minute=i) for i, v in enumerate(values)], cuts)
    for table in ("user_hourly", "user_daily"):
        merged = row_of(plan, settled, table)["recharge_usd"]
        assert merged is not None
        assert math.isfinite(merged)
    assert all(math.isfinite(v) for v in _left_out(settled, "recharge_usd"))


def test_two_maximal_double_partials_keep_one_and_set_the_other_aside(plan: TransformPlan) -> None:
    """Hypothesis found it: two partials of 1.7976914204485444e308 (each finite, above the merge's
    rounding margin) were both set aside, leaving the row without a value it had accepted."""
    big = 1.7976914204485444e308
    parts = [source_batch(PURCHASE, [purchase(big, minute=0)], first_id=0)]
    parts.append(source_batch(PURCHASE, [purchase(big, minute=1)], first_id=1))
    settled = merge.settle(run(plan, parts), plan)
    for table in ("user_hourly", "user_daily"):
        assert row_of(plan, settled, table)["recharge_usd"] == big
    assert _left_out(settled, "recharge_usd") == [big]  # counted once (the hourly table's)


@pytest.mark.parametrize(
    ("values", "arrow_type", "bounded"),
    [
        ([2**62 - 1, 2**62 - 1], pa.int64(), True),  # 2 x (2^62 - 1) = 2^63 - 2: no total can overflow
        ([2**62, 1], pa.int64(), False),  # 2 x 2^62 > 2^63 - 1: the exact grouping decides
        ([-(2**62), 0], pa.int64(), False),  # a magnitude bound: the sign does not help
        ([None, None], pa.int64(), True),
        ([], pa.int64(), True),
        ([1e300, -1e300], pa.float64(), True),
        ([8.9e307, 1.0], pa.float64(), False),  # 2 x 8.9e307 is past half the double range
        ([1.0, math.nan], pa.float64(), False),  # min_max would skip the NaN
        ([1.0, math.inf], pa.float64(), False),
    ],
)
def test_a_column_is_spared_the_exact_grouping_only_when_no_total_can_leave_its_range(
    values: list[Any], arrow_type: pa.DataType, bounded: bool
) -> None:
    assert merge._bounded(pa.chunked_array([values], arrow_type), len(values)) is bounded

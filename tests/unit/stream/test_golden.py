"""The stream transform (and the Arrow merge) against the hand-written golden fixture.

tests/golden/events.yaml holds hand-written messages; tests/golden/expected.yaml the wide rows,
quarantine reasons, late ids and per-topic counts computed BY HAND from the catalog's documented
semantics. No project code computes an expected value here (unlike test_transform.py, whose oracle is
the catalog's own reference parser and fold). Pure Arrow: no Spark, no services.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests.golden.golden import (
    Actual,
    Expected,
    Message,
    actual,
    complete_rows,
    load_expected,
    load_fixture,
    load_messages,
    to_batch,
)
from widehouse.catalog import REJECTION_REASONS, Catalog, load_catalog
from widehouse.stream.output import output_schema
from widehouse.stream.plan import TransformPlan
from widehouse.stream.transform import transform

ROOT = Path(__file__).parents[3]
UNKNOWN_TOPIC_REASON = "unknown_topic"  # the transform's own reason, beside the parser's


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog(ROOT / "schemas")


@pytest.fixture(scope="module")
def messages() -> list[Message]:
    return load_messages()


@pytest.fixture(scope="module")
def expected() -> Expected:
    return load_expected()


@pytest.fixture(scope="module")
def plan(catalog: Catalog) -> TransformPlan:
    return TransformPlan(catalog, tuple(t.name for t in catalog.wide_tables))


# How the messages reach the transform: each inner list is one input partition (one transform call),
# fed in batches of a few messages. Ties on first / last sit next to each other in the file, so the
# round-robin and reversed splits put their halves in different partitions and orders.
SPLITS: dict[str, Callable[[list[Message]], list[list[Message]]]] = {
    "one_partition": lambda ms: [ms],
    "reversed": lambda ms: [ms[::-1]],
    "two_halves": lambda ms: [ms[: len(ms) // 2], ms[len(ms) // 2 :]],
    "three_round_robin": lambda ms: [ms[i::3] for i in range(3)],
}


def run(plan: TransformPlan, partitions: list[list[Message]], batch_size: int = 4) -> pa.Table:
    outputs: list[pa.RecordBatch] = []
    for part in partitions:
        batches = [to_batch(part[i : i + batch_size]) for i in range(0, len(part), batch_size)]
        outputs += list(transform(iter(batches), plan))
    return pa.Table.from_batches(outputs, schema=output_schema(plan))


@pytest.fixture(scope="module")
def results(plan: TransformPlan, messages: list[Message]) -> dict[str, Actual]:
    return {name: actual(run(plan, split(messages)), plan) for name, split in SPLITS.items()}


def row_diff(want: dict[Any, dict[str, Any]], got: dict[Any, dict[str, Any]]) -> list[str]:
    problems = [f"missing row {k}" for k in sorted(set(want) - set(got), key=str)]
    problems += [f"unexpected row {k}: {got[k]}" for k in sorted(set(got) - set(want), key=str)]
    for k in sorted(set(want) & set(got), key=str):
        for column, value in want[k].items():
            if got[k].get(column) != value or type(got[k].get(column)) is not type(value):
                problems.append(f"{k} {column}: expected {value!r}, got {got[k].get(column)!r}")
    return problems


# ----------------------------------------------------------------------------------- the fixture
def test_fixture_is_big_and_varied_enough(catalog: Catalog, messages: list[Message]) -> None:
    fixture = load_fixture()
    assert len(messages) >= 40
    users = {str(m.key) for m in messages if m.key}
    assert 3 <= len(users) <= 5, users
    for topic, fields in fixture["topics"].items():
        described = catalog.topic(topic)
        assert (described.key, described.event_time) == (fields["key"], fields["event_time"]), topic
    assert {m.topic for m in messages} - set(fixture["topics"]) == {"persistent://likee/video/video_rewind"}
    assert not catalog.has_topic("persistent://likee/video/video_rewind")


def test_fixture_covers_every_aggregate_kind(catalog: Catalog, expected: Expected) -> None:
    """Every (aggregate, filtered or not) the catalog uses shows a non-trivial value in the expected
    rows through a fixture topic; a new kind in the catalog fails here until the fixture covers it."""
    used = {(m.agg, m.filter is not None) for t in catalog.topics for m in t.mappings}
    assert {c.agg for t in catalog.wide_tables for c in t.columns} <= {agg for agg, _ in used}
    fixture_topics = [t for t in load_fixture()["topics"] if catalog.has_topic(t)]
    covered = set()
    for topic in fixture_topics:
        for m in catalog.topic(topic).mappings:
            values = [
                v[m.column]
                for (table, _, _), v in expected.rows.items()
                if table == m.table and m.column in v
            ]
            if any(v not in (None, 0) for v in values):
                covered.add((m.agg, m.filter is not None))
    assert used <= covered, f"not covered by the golden fixture: {sorted(used - covered)}"


def test_fixture_covers_every_rejection_reason_ties_and_lateness(
    catalog: Catalog, messages: list[Message], expected: Expected
) -> None:
    reasons = set(expected.quarantine.values())
    assert {*REJECTION_REASONS, UNKNOWN_TOPIC_REASON} <= reasons, "a bad-input class has no golden message"
    assert expected.late
    ids = {m.message_id for m in messages}
    assert set(expected.quarantine) <= ids
    assert set(expected.late) <= ids
    assert not set(expected.quarantine) & set(expected.late)
    # ties: two valid messages of one topic, key and event time, for a topic with first / last columns
    valid = [
        m for m in messages if m.message_id not in expected.quarantine and m.message_id not in expected.late
    ]
    tied: dict[tuple[str, str | None, int | None], int] = {}
    for m in valid:
        tied[(m.topic, m.key, m.event_ms)] = tied.get((m.topic, m.key, m.event_ms), 0) + 1
    for agg in ("first", "last"):
        assert any(
            n > 1 and any(mp.agg == agg for mp in catalog.topic(topic).mappings)
            for (topic, _, _), n in tied.items()
        ), f"no tie on event time for a {agg} column"
    # the expected per-topic counts add up to the messages
    assert sum(c["rows_in"] for c in expected.topics.values()) == len(messages)
    for topic, c in expected.topics.items():
        assert c["rows_in"] == sum(1 for m in messages if m.topic == topic), topic
        assert c["rows_in"] == c["valid"] + c["bad"] + c["late"], topic
        assert c["bad"] == sum(
            1 for m in messages if m.topic == topic and m.message_id in expected.quarantine
        )
        assert c["late"] == sum(1 for m in messages if m.topic == topic and m.message_id in expected.late)


# ----------------------------------------------------------------------------------- the transform
@pytest.mark.parametrize("split", list(SPLITS))
@pytest.mark.parametrize("table", ["user_hourly", "user_daily"])
def test_wide_rows_equal_the_golden_rows(
    catalog: Catalog, expected: Expected, results: dict[str, Actual], split: str, table: str
) -> None:
    want = complete_rows(catalog, {k: v for k, v in expected.rows.items() if k[0] == table})
    got = {k: v for k, v in results[split].rows.items() if k[0] == table}
    assert row_diff(want, got) == []


@pytest.mark.parametrize("split", list(SPLITS))
def test_quarantine_reasons_equal_the_golden_ones(
    expected: Expected, results: dict[str, Actual], split: str
) -> None:
    assert results[split].quarantine == expected.quarantine


@pytest.mark.parametrize("split", list(SPLITS))
def test_late_events_equal_the_golden_ones(
    expected: Expected, results: dict[str, Actual], split: str
) -> None:
    assert results[split].late == expected.late


@pytest.mark.parametrize("split", list(SPLITS))
def test_topic_counts_equal_the_golden_ones(
    expected: Expected, results: dict[str, Actual], split: str
) -> None:
    assert results[split].topics == expected.topics

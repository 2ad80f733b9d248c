"""The hand-written golden fixture end to end: real Pulsar -> the streaming job -> ClickHouse and Delta.

tests/golden/events.yaml's messages are published to a real broker, the job runs as a user runs it
(a subprocess, ``--available-now``), and both sinks must hold exactly the wide rows of
tests/golden/expected.yaml (computed by hand), the quarantine reason of every bad message published
and the per-topic counts. No project code computes an expected value.

A real broker stamps the publish time itself (now), while the fixture judges event times against
its own publish times. So:

- messages whose verdict comes from that distance (``publish_relative: true`` in events.yaml: the
  late ones and the absurd-by-distance ones) are left out; each is late or quarantined in
  expected.yaml, hence in no expected row, so the expected rows stay the hand-written ones;
- every time is shifted by whole days so that the newest event time is in the past, less than a day
  before now (nothing ahead of its publish time, everything far within ``max_age``);
- the deployment's copy of schemas/ raises the catalog's lateness to 3 days, so every valid event
  published is on time (the boundary-valid L08 and L11 included).

The fixture's unknown topic is left out too: the job reads only the catalog's topics.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.golden.golden import (
    DAY_MS,
    Message,
    complete_rows,
    for_publishing,
    load_expected,
    load_fixture,
    load_messages,
    to_ms,
)
from tests.integration.stream_support import Deployment
from tests.support import copy_catalog
from widehouse.catalog import Catalog
from widehouse.contracts.tables import LATE, PROGRESS, QUARANTINE
from widehouse.generator.manifest import normalize
from widehouse.settings import Settings
from widehouse.stream.tables import delta_side

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow, pytest.mark.e2e]

LATENESS = "3d"
"""The deployment's lateness: more than the oldest published event's age (under 28 h) when published."""

Rows = dict[tuple[Any, int], dict[str, Any]]


def test_golden_fixture_through_pulsar_equals_clickhouse_and_delta(
    services: Settings, spark: Any, tmp_path: Path
) -> None:
    check_golden_stream(_deployment(tmp_path), spark)


def check_golden_stream(deployment: Deployment, spark: Any) -> dict[str, Rows]:
    """Publish the fixture, run the stream over two groups, compare both sinks with expected.yaml
    (also run on the standalone cluster by tests/cluster/); returns expected.yaml's wide rows (per
    table, keyed (key, period start in epoch ms), complete)."""
    catalog = deployment.catalog
    rules = catalog.rules

    # ----------------------------------------------------------------- what is published, and when
    fixture_topics = set(load_fixture()["topics"])  # the catalog topics (not the unknown one)
    unshifted = load_messages()
    published_ids = {m.message_id for m in unshifted if m.topic in fixture_topics and not m.publish_relative}
    now_ms = int(time.time() * 1000)
    newest = max(m.event_ms for m in unshifted if m.message_id in published_ids and m.event_ms is not None)
    shift = (now_ms - newest) // DAY_MS  # the newest event time lands in (now - 1 day, now]
    messages = [m for m in load_messages(shift_days=shift) if m.message_id in published_ids]
    expected = load_expected(shift_days=shift)

    # every message left out is late or quarantined by hand, so it is in no expected wide row
    left_out = {m.message_id for m in unshifted} - published_ids
    judged = set(expected.late) | set(expected.quarantine)
    assert left_out <= judged, left_out - judged
    assert set(expected.late) <= left_out, "a late message is published: its verdict needs its publish time"
    valid = [m for m in messages if m.message_id not in expected.quarantine]
    valid_times = [m.event_ms for m in valid if m.event_ms is not None]
    assert len(valid_times) == len(valid)  # the fixture (shifted) wrote every valid event time
    assert max(valid_times) <= now_ms  # never ahead of its publish time

    ids = deployment.publish_messages((t, k, p, e) for t, k, p, _, e in for_publishing(messages))
    assert len(set(ids)) == len(messages)
    # every valid event was published on time (and, lateness < max_age, not absurdly old)
    assert int(time.time() * 1000) - min(valid_times) <= rules.lateness_ms < rules.max_age_ms
    origins = deployment.topic_origins  # deployment topic -> catalog topic
    groups = deployment.plan_groups(
        2, topics=sorted(t for t, origin in origins.items() if origin in fixture_topics)
    )
    assert len(groups) >= 2  # partial rows of one key and hour come from several groups

    run = deployment.stream()
    assert run.returncode == 0, run.stdout[-5000:]

    # ----------------------------------------------------------- wide rows: every row, every column
    want = _expected_rows(catalog, complete_rows(catalog, expected.rows))
    assert set(want) == {t.name for t in catalog.wide_tables}
    for table, rows in want.items():
        for sink, got in (
            ("clickhouse", deployment.clickhouse_rows(table)),
            ("delta", deployment.delta_rows(spark, table)),
        ):
            actual = _plain_rows(catalog, table, got)
            assert actual == rows, f"{sink} {table}"
            assert _types(actual) == _types(rows), f"{sink} {table}: value types"

    # ------------------------------------------------- quarantine: the hand-written reason per message
    bad = {m.message_id: m for m in messages if m.message_id in expected.quarantine}
    want_reasons = {message_id: expected.quarantine[message_id] for message_id in bad}
    clickhouse_quarantine = [
        (origins[r["topic"]], bytes.fromhex(r["payload"]), r["payload_bytes"], r["reason"])
        for r in deployment.clickhouse(
            f"SELECT topic, reason, hex(payload) AS payload, payload_bytes FROM {QUARANTINE}"
        )
    ]
    assert _reasons_by_message(bad, clickhouse_quarantine) == want_reasons
    delta = deployment.settings.delta
    delta_quarantine = [
        (origins[r["topic"]], bytes(r["payload"]), r["payload_bytes"], r["reason"])
        for r in spark.read.format("delta").load(delta_side(delta, QUARANTINE)).collect()
    ]
    assert _reasons_by_message(bad, delta_quarantine) == want_reasons

    # nothing published is late
    assert deployment.clickhouse(f"SELECT count() AS n FROM {LATE}") == [{"n": 0}]
    assert spark.read.format("delta").load(delta_side(delta, LATE)).count() == 0

    # ------------------------------------------------------------- progress: per-topic counts
    want_progress = {}
    for topic, counts in expected.topics.items():
        if topic not in fixture_topics:
            continue
        sent = [m for m in messages if m.topic == topic]
        quarantined = sum(1 for m in sent if m.message_id in expected.quarantine)
        # no valid message was left out: the hand-written valid count is what was published and valid
        assert len(sent) == counts["valid"] + quarantined, topic
        want_progress[topic] = {
            "rows_in": len(sent),
            "rows_out": counts["valid"],
            "bad": quarantined,
            "late": 0,
        }
    clickhouse_progress = deployment.clickhouse(
        "SELECT topic, sum(rows_in) AS rows_in, sum(rows_out) AS rows_out, sum(bad) AS bad, "
        f"sum(late) AS late FROM {PROGRESS} FINAL WHERE topic != '*' GROUP BY topic"
    )
    assert {origins[r.pop("topic")]: r for r in clickhouse_progress} == want_progress
    delta_progress = (
        spark.read.format("delta")
        .load(delta_side(delta, PROGRESS))
        .where("topic != '*'")
        .groupBy("topic")
        .agg({"rows_in": "sum", "rows_out": "sum", "bad": "sum", "late": "sum"})
        .collect()
    )
    assert {
        origins[r["topic"]]: {name: r[f"sum({name})"] for name in ("rows_in", "rows_out", "bad", "late")}
        for r in delta_progress
    } == want_progress
    return want


# ------------------------------------------------------------------------------------------ helpers
def _deployment(root: Path, extra_env: dict[str, str] | None = None) -> Deployment:
    """A deployment over a copy of schemas/ whose lateness is :data:`LATENESS`."""
    schemas = copy_catalog(root)
    catalog_file = schemas / "catalog.yaml"
    doc = yaml.safe_load(catalog_file.read_text(encoding="utf-8"))
    doc["event_time"]["lateness"] = LATENESS
    catalog_file.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    deployment = Deployment(root, schemas_dir=schemas, extra_env=dict(extra_env or {}))
    assert deployment.catalog.rules.lateness_ms == 3 * DAY_MS
    return deployment


def _expected_rows(catalog: Catalog, rows: dict[tuple[str, Any, str], dict[str, Any]]) -> dict[str, Rows]:
    """expected.yaml's complete rows per table, keyed (key, period start in epoch ms), times in epoch ms."""
    out: dict[str, Rows] = {}
    for (table, key, period), values in rows.items():
        times = {c.name for c in catalog.table(table).columns if c.value_type == "timestamp-ms"}
        start = to_ms(period if "T" in period else f"{period}T00:00:00Z")
        out.setdefault(table, {})[(key, start)] = {
            name: to_ms(value) if name in times and value is not None else value
            for name, value in values.items()
        }
    return out


def _plain_rows(catalog: Catalog, table: str, rows: dict[tuple[Any, Any], dict[str, Any]]) -> Rows:
    """A sink's merged rows in the same terms: every wide column, times as epoch ms."""
    columns = [c.name for c in catalog.table(table).columns]
    return {
        (normalize(key), normalize(period)): {name: normalize(row[name]) for name in columns}
        for (key, period), row in rows.items()
    }


def _types(rows: Rows) -> dict[tuple[Any, int], dict[str, str]]:
    return {k: {name: type(v).__name__ for name, v in row.items()} for k, row in rows.items()}


def _reasons_by_message(bad: dict[str, Message], rows: list[tuple[str, bytes, int, str]]) -> dict[str, str]:
    """Quarantine rows (catalog topic, stored payload, payload size, reason) -> {fixture id: reason}.

    Sinks know broker message ids only, so a row is matched to the one bad message of its topic whose
    payload has its size and starts with its stored (possibly truncated) payload.
    """
    reasons: dict[str, str] = {}
    for topic, stored, size, reason in rows:
        matches = [
            m.message_id
            for m in bad.values()
            if m.topic == topic and len(m.payload) == size and m.payload.startswith(stored)
        ]
        assert len(matches) == 1, f"{topic} {stored[:80]!r} ({size} bytes) matches {matches}"
        assert matches[0] not in reasons, f"{matches[0]} quarantined twice"
        reasons[matches[0]] = reason
    return reasons

"""The generator without Pulsar: determinism, labels, and a manifest equal to the reference oracle."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from widehouse.catalog import Accepted, Catalog, load_catalog, parse_event
from widehouse.catalog.semantics.fold import aggregate
from widehouse.generator import (
    BAD_CLASSES,
    LABEL_PROPERTY,
    POLICY,
    REASONS,
    GenerateOptions,
    Manifest,
    TrafficGenerator,
    diff_rows,
)

ROOT = Path(__file__).parents[3]
BASE = 1_778_400_000_000  # 2026-05-10T08:00:00Z


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog(ROOT / "schemas")


def run(catalog: Catalog, **options: Any) -> tuple[TrafficGenerator, list[Any]]:
    settings = {
        "count": 4000,
        "rate": 200.0,
        "seed": 5,
        "base_time_ms": BASE,
        "users": 50,
        "chunk_size": 1000,
    }
    generator = TrafficGenerator(catalog, GenerateOptions(**{**settings, **options}))
    return generator, list(generator.chunks())


def payloads(chunks: list[Any]) -> list[tuple[int, str, bytes, str | None, int]]:
    return [
        (c.topics[j], c.keys[j], c.payloads[j], c.labels[j], c.offsets_ms[j])
        for c in chunks
        for j in range(len(c))
    ]


def test_same_seed_same_events_and_manifest(catalog: Catalog) -> None:
    first, chunks_a = run(catalog)
    second, chunks_b = run(catalog)
    assert payloads(chunks_a) == payloads(chunks_b)
    assert first.manifest().deterministic == second.manifest().deterministic
    # the manifest is deterministic down to its bytes
    assert (
        first.manifest({"x": 1}).to_json().split(b'"run"')[0]
        == second.manifest({"x": 2}).to_json().split(b'"run"')[0]
    )


def test_chunk_size_does_not_change_the_traffic(catalog: Catalog) -> None:
    _, small = run(catalog, chunk_size=1000)
    _, other = run(catalog, chunk_size=1000)
    assert payloads(small) == payloads(other)


def test_another_seed_or_base_time_gives_other_events(catalog: Catalog) -> None:
    _, base = run(catalog)
    _, seeded = run(catalog, seed=6)
    _, later = run(catalog, base_time_ms=BASE + 3_600_000)
    assert payloads(base) != payloads(seeded)
    assert payloads(base) != payloads(later)


def test_labels_classes_and_manifest_match_the_reference_parser(catalog: Catalog) -> None:
    """Every message parses to exactly what its label promises, and the manifest's expected wide rows
    equal the reference aggregation over the accepted, on-time events."""
    generator, chunks = run(
        catalog,
        count=12_000,
        bad_rate=0.1,
        late_rate=0.05,
        burst_factor=3.0,
        burst_every_s=20,
        burst_length_s=5,
        user_skew=1.2,
        topic_skew=0.8,
    )
    manifest = generator.manifest()
    accepted: list[Any] = []
    labels: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    per_topic: Counter[str] = Counter()
    for topic_index, _key, payload, tag, offset in payloads(chunks):
        topic = generator.topics[topic_index]
        per_topic[topic.origin] += 1
        label = tag or "ok"
        labels[label] += 1
        result = parse_event(topic, payload, BASE + offset, catalog.rules, catalog.max_payload_bytes)
        if POLICY[label] == "quarantine":
            assert not isinstance(result, Accepted), (label, payload[:120])
            assert result.reason == REASONS[label], (label, result)
            reasons[result.reason] += 1
        else:
            assert isinstance(result, Accepted), (label, result)
            assert result.late == (label == "late")
            if not result.late:
                accepted.append((topic, result.key, result.event_ms, result.row))
    assert set(labels) == {"ok", "late", *BAD_CLASSES}
    totals = manifest.counts()
    assert totals.by_label == {label: labels.get(label, 0) for label in totals.by_label}
    assert totals.by_reason == dict(reasons)
    assert totals.wide == len(accepted) and totals.sent == 12_000
    assert {t: manifest.counts(t).sent for t in manifest.topics} == dict(per_topic)
    reference = aggregate(catalog, accepted)
    for table in manifest.tables():
        assert diff_rows(manifest.expected_rows(table), reference[table]) == []
        assert len(manifest.expected_rows(table)) >= 50  # 50 users, one day, two or more hours


def test_oversize_and_late_are_what_they_claim(catalog: Catalog) -> None:
    generator, chunks = run(catalog, count=3000, bad_rate=0.5, bad_classes=("oversize",), late_rate=0.2)
    sizes = [len(p) for _, _, p, label, _ in payloads(chunks) if label == "oversize"]
    assert sizes and min(sizes) > catalog.max_payload_bytes
    for _, _, payload, label, offset in payloads(chunks):
        if label == "late":
            behind = BASE + offset - int(payload.split(b',"')[1].split(b":")[1])
            assert catalog.rules.lateness_ms < behind < catalog.rules.max_age_ms
    assert generator.manifest().counts().by_label["oversize"] == len(sizes)


def test_topic_selection_and_skew(catalog: Catalog) -> None:
    generator, chunks = run(catalog, topics=r"/live/", count=3000)
    assert {t.name.namespace for t in generator.topics} == {"live"}
    counts = Counter(generator.topics[t].name.local for t, *_ in payloads(chunks))
    assert counts.most_common(1)[0][0] in {"live_like", "live_enter", "live_comment"}  # the heavy ones
    _, skewed = run(catalog, count=3000, topic_skew=2.0)
    top = Counter(t for t, *_ in payloads(skewed)).most_common(1)[0][1]
    assert top > 3000 * 0.45  # Zipf 2: the first topic gets ~60 %


def test_users_follow_the_skew_and_keys_match_the_formula(catalog: Catalog) -> None:
    _, chunks = run(catalog, users=200, user_skew=1.5, count=5000)
    keys = Counter(key for _, key, *_ in payloads(chunks))
    assert keys.most_common(1)[0][0] == "10000001"
    assert all(10000001 <= int(k) <= 10000200 for k in keys)
    _, flat = run(catalog, users=200, user_skew=0.0, count=5000)
    assert Counter(key for _, key, *_ in payloads(flat)).most_common(1)[0][1] < keys.most_common(1)[0][1] / 3


def test_timeline_paces_messages_and_bursts(catalog: Catalog) -> None:
    _, steady = run(catalog, count=1000, rate=100.0)
    offsets = [o for *_, o in payloads(steady)]
    assert offsets == sorted(offsets) and offsets[-1] == 9990
    _, bursty = run(catalog, count=1000, rate=100.0, burst_factor=4.0, burst_every_s=10, burst_length_s=2)
    offsets = [o for *_, o in payloads(bursty)]
    in_first_burst = sum(1 for o in offsets if o < 2000)
    assert in_first_burst == 800  # 4x the rate during the burst


def test_hours_and_keys_in_the_manifest(catalog: Catalog) -> None:
    generator, _ = run(catalog, count=2000, rate=0.5)  # 4000 s: spans two or more hours
    manifest = generator.manifest()
    hours = manifest.data["periods"]["hours"]
    assert len(hours) >= 2 and hours[0].startswith("2026-05-10T0")
    rows = manifest.expected_rows("user_hourly")
    assert all(isinstance(k, int) and p % 3_600_000 == 0 for k, p in rows)
    assert all(set(v) == set(manifest.columns("user_hourly")) for v in rows.values())


def test_manifest_round_trip(tmp_path: Path, catalog: Catalog) -> None:
    generator, _ = run(catalog, count=500)
    manifest = generator.manifest({"exact": True})
    loaded = Manifest.load(manifest.save(tmp_path / "m.json"))
    assert loaded.data == manifest.data
    assert loaded.expected_rows("user_daily") == manifest.expected_rows("user_daily")
    assert loaded.data["policy"]["unknown_fields"] == "accept"
    assert LABEL_PROPERTY == "wh_label"

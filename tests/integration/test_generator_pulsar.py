"""A generated batch read back from real Pulsar matches the manifest, message by message."""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from widehouse.catalog import Accepted, Catalog, load_catalog, parse_event
from widehouse.catalog.semantics.fold import aggregate
from widehouse.errors import ConfigError
from widehouse.generator import (
    LABEL_PROPERTY,
    POLICY,
    REASONS,
    GenerateOptions,
    Manifest,
    diff_rows,
    generate,
)
from widehouse.pulsar import PulsarAdmin
from widehouse.pulsar import client as pulsar_client
from widehouse.settings import Settings

pytestmark = pytest.mark.integration
ROOT = Path(__file__).parents[2]


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog(ROOT / "schemas")


@pytest.fixture
def suffix(services: Settings) -> Iterator[str]:
    """A unique tenant suffix; the tenants, namespaces and topics it created are removed afterwards."""
    value = f"it{uuid.uuid4().hex[:8]}"
    yield value
    with PulsarAdmin(services.pulsar) as admin:
        for tenant in [t for t in admin.tenants() if t.endswith(f"-{value}")]:
            for namespace in admin.namespaces(tenant):
                for topic in admin.list_partitioned_topics(namespace):
                    admin.delete_topic(topic)
                admin.request("DELETE", f"namespaces/{namespace}", ok=(200, 204, 404))
            admin.request("DELETE", f"tenants/{tenant}", ok=(200, 204, 404))


def read_all(settings: Settings, topics: list[str], expected: int) -> list[Any]:
    import pulsar

    client = pulsar_client.connect(settings.pulsar)
    try:
        consumer = client.subscribe(
            topics, f"it-{uuid.uuid4().hex[:6]}", initial_position=pulsar.InitialPosition.Earliest
        )
        messages = []
        deadline = time.monotonic() + 60
        while len(messages) < expected and time.monotonic() < deadline:
            try:
                message = consumer.receive(timeout_millis=5000)
            except pulsar.Timeout:
                continue
            messages.append(message)
            consumer.acknowledge(message)
        try:  # nothing more than expected
            extra = consumer.receive(timeout_millis=1000)
            messages.append(extra)
        except pulsar.Timeout:
            pass
        consumer.unsubscribe()
        return messages
    finally:
        client.close()


def test_published_batch_matches_the_manifest(
    services: Settings, catalog: Catalog, suffix: str, tmp_path: Path
) -> None:
    options = GenerateOptions(
        count=6000,
        rate=0,
        seed=11,
        users=40,
        bad_rate=0.1,
        late_rate=0.05,
        topics=r"^persistent://(bigolive/(live|commerce)|likee/ads)/",
        tenant_suffix=suffix,
        create_topics=True,
        manifest_path=tmp_path / "manifest.json",
    )
    manifest = generate(services, options, catalog)
    assert manifest.exact and manifest.data["run"]["sent"] == 6000 and manifest.data["run"]["failed"] == 0
    assert Manifest.load(tmp_path / "manifest.json").deterministic == manifest.deterministic

    by_published = {manifest.published_name(t): catalog.topic(t) for t in manifest.topics}
    # partition counts follow the catalog's hints
    for published, topic in by_published.items():
        assert manifest.data["run"]["partitions"][published] == topic.traffic.partitions
    messages = read_all(services, sorted(by_published), 6000)
    assert len(messages) == 6000

    sent: Counter[str] = Counter()
    labels: dict[str, Counter[str]] = defaultdict(Counter)
    reasons: Counter[str] = Counter()
    partitions_of_key: dict[tuple[str, str], set[str]] = defaultdict(set)
    accepted = []
    for message in messages:
        name = message.topic_name()
        base = name.rsplit("-partition-", 1)[0]
        topic = by_published[base]
        sent[topic.origin] += 1
        label = message.properties().get(LABEL_PROPERTY, "ok")
        labels[topic.origin][label] += 1
        partitions_of_key[(base, message.partition_key())].add(name)
        result = parse_event(
            topic, message.data(), message.publish_timestamp(), catalog.rules, catalog.max_payload_bytes
        )
        if POLICY[label] == "quarantine":
            assert not isinstance(result, Accepted) and result.reason == REASONS[label], (label, result)
            reasons[result.reason] += 1
        else:
            assert isinstance(result, Accepted), (label, result)
            assert result.late == (label == "late"), (label, result.event_ms, message.publish_timestamp())
            assert str(result.key) == message.partition_key()
            if not result.late:
                accepted.append((topic, result.key, result.event_ms, result.row))

    assert dict(sent) == {t: manifest.counts(t).sent for t in manifest.topics}
    for topic_name in manifest.topics:
        expected = {k: v for k, v in manifest.counts(topic_name).by_label.items() if v}
        assert dict(labels[topic_name]) == expected, topic_name
    assert dict(reasons) == manifest.counts().by_reason
    assert all(len(p) == 1 for p in partitions_of_key.values())  # one partition per key
    # the expectations hold with the real publish times
    reference = aggregate(catalog, accepted)
    for table in manifest.tables():
        assert diff_rows(manifest.expected_rows(table), reference[table]) == []


def test_publishing_is_paced_to_the_rate(services: Settings, catalog: Catalog, suffix: str) -> None:
    options = GenerateOptions(
        count=900, rate=300.0, seed=2, users=5, topics="/app/click$", tenant_suffix=suffix, create_topics=True
    )
    started = time.monotonic()
    manifest = generate(services, options, catalog)
    elapsed = time.monotonic() - started
    run = manifest.data["run"]
    assert 2.9 <= run["elapsed_s"] <= elapsed
    assert run["rate_achieved"] <= 300 * 1.05
    assert manifest.exact and manifest.counts().sent == 900


def test_publishing_needs_topics_unless_asked_to_create_them(
    services: Settings, catalog: Catalog, suffix: str
) -> None:
    from widehouse.errors import PulsarError

    options = GenerateOptions(count=10, topics="/app/click$", tenant_suffix=suffix)
    with pytest.raises(PulsarError, match="does not exist; create it with --create-topics"):
        generate(services, options, catalog)


def test_a_stopped_run_accounts_exactly_the_chunks_it_sent(
    services: Settings, catalog: Catalog, suffix: str
) -> None:
    stop = threading.Event()

    def progress(sent: int, _total: int | None, _elapsed: float) -> None:
        if sent >= 300:  # told at the start of the chunk [300, 400)
            stop.set()

    options = GenerateOptions(
        count=5000, rate=0, seed=4, users=7, late_rate=0.1, topics="/app/click$", tenant_suffix=suffix,
        create_topics=True, chunk_size=100,
    )  # fmt: skip
    manifest = generate(services, options, catalog, progress, stop=stop)
    assert (manifest.data["run"]["stopped"], manifest.data["run"]["sent"], manifest.exact) == (
        True,
        400,
        True,
    )
    assert manifest.counts().sent == 400
    (published,) = [manifest.published_name(t) for t in manifest.topics]
    messages = read_all(services, [published], 400)
    assert len(messages) == 400  # nothing beyond the chunks sent
    topic = catalog.topic(manifest.topics[0])
    accepted, late = [], 0
    for message in messages:
        result = parse_event(
            topic, message.data(), message.publish_timestamp(), catalog.rules, catalog.max_payload_bytes
        )
        if isinstance(result, Accepted) and result.late:
            late += 1
        elif isinstance(result, Accepted):
            accepted.append((topic, result.key, result.event_ms, result.row))
    assert late == manifest.counts().late > 0
    reference = aggregate(catalog, accepted)
    for table in manifest.tables():
        assert diff_rows(manifest.expected_rows(table), reference[table]) == []


def test_the_timing_margin_sets_how_stale_a_base_time_may_be(
    services: Settings, catalog: Catalog, suffix: str
) -> None:
    # lateness 1 h, max delay 30 s: the default margin (5 min) allows 3,270 s behind now, 1 min 3,510 s
    base_ms = int(time.time() * 1000) - 3_400_000
    options = GenerateOptions(
        count=10, rate=0, base_time_ms=base_ms, late_rate=0, bad_rate=0, topics="/app/click$",
        tenant_suffix=suffix, create_topics=True,
    )  # fmt: skip
    with pytest.raises(ConfigError, match="s behind now"):
        generate(services, options, catalog)
    manifest = generate(services, dataclasses.replace(options, timing_margin_ms=60_000), catalog)
    assert manifest.exact and manifest.counts().sent == manifest.counts().wide == 10

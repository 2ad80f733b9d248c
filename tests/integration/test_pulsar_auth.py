"""Widehouse against a Pulsar broker that enforces token authentication and authorization.

One secured standalone broker of this module's own (``WIDEHOUSE_PULSAR_AUTH=token``, free ports, its
own state dir), started once. With the superuser token the admin calls, the generator, the sink,
the source (batch read and a stream's durable subscription) work; with no token, a token of a role
without permission or an expired token each fails at once with an error that names the namespace or
topic (and the role) and never prints the token; a token that expires while a producer runs is
reported as expired instead of being retried.
"""

from __future__ import annotations

import dataclasses
import os
import stat
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jwt
import pytest

# Spark starts the Python data source planner and stream reader with PYSPARK_PYTHON (not the
# spark.pyspark.python setting): point it at this interpreter before the session's JVM starts.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from tests.conftest import free_port, settings_for
from tests.integration.pulsar_support import drop_namespace, publish
from widehouse.catalog import load_catalog
from widehouse.generator import GenerateOptions, generate
from widehouse.pulsar import PulsarAdmin, tokens
from widehouse.pulsar import client as pulsar_client
from widehouse.pulsar.auth import (
    PulsarAuthenticationError,
    PulsarAuthError,
    PulsarAuthorizationError,
    PulsarTokenExpiredError,
)
from widehouse.settings import Settings
from widehouse.stream.producers import Outgoing, Producers

pytestmark = pytest.mark.integration
ROOT = Path(__file__).parents[2]
FAST = 5.0  # seconds: "at once" (the client's own timeouts are 30 s)


@pytest.fixture(scope="session")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    """A secured Pulsar standalone of our own; settings carrying its superuser token."""
    from widehouse.services.pulsar import PulsarStandalone

    state = tmp_path_factory.mktemp("pulsar-auth")
    env = {
        "WIDEHOUSE_PULSAR_AUTH": "token",
        "WIDEHOUSE_PULSAR_BROKER_PORT": str(free_port()),
        "WIDEHOUSE_PULSAR_WEB_PORT": str(free_port()),
    }
    service = PulsarStandalone(settings_for(state, **env).local)
    process = service.start()
    try:
        process.wait_healthy(service.probe, timeout=300)
        settings = settings_for(state, **env)  # now with the superuser token the start generated
        assert settings.pulsar.auth_token == tokens.admin_token_path(state).read_text().strip()
        yield settings
    finally:
        process.stop(timeout=60)


def as_token(settings: Settings, token: str | None) -> Settings:
    return dataclasses.replace(settings, pulsar=dataclasses.replace(settings.pulsar, auth_token=token))


def role_token(settings: Settings, role: str, ttl: float | None = None) -> str:
    return tokens.issue_token(settings.state_dir, role, ttl_seconds=ttl)


@pytest.fixture
def ns(secured: Settings) -> Iterator[str]:
    namespace = f"auth-it/t-{uuid.uuid4().hex[:8]}"
    with PulsarAdmin(secured.pulsar) as admin:
        admin.ensure_namespace(namespace)
        yield namespace
        drop_namespace(admin, namespace)  # best effort: the broker is this module's own anyway


def refused(kind: type[Exception], call: Any, *, names: str, token: str | None) -> str:
    """Run ``call``, which must raise ``kind`` within :data:`FAST` seconds naming ``names`` and not
    showing ``token``; returns the message."""
    started = time.monotonic()
    with pytest.raises(kind) as caught:
        call()
    elapsed = time.monotonic() - started
    message = str(caught.value)
    assert elapsed < FAST, f"took {elapsed:.1f} s: {message}"
    assert names in message
    if token:
        assert token not in message
        assert token.split(".")[2] not in message  # not even the signature
    return message


# -- the broker and its secrets ------------------------------------------------------------------
def test_secrets_are_private_and_the_superuser_token_names_its_role(secured: Settings) -> None:
    key_file = tokens.secret_key_path(secured.state_dir)
    token_file = tokens.admin_token_path(secured.state_dir)
    for path in (key_file, token_file):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(key_file.parent.stat().st_mode) == 0o700
    key = key_file.read_bytes()
    assert len(key) == 32
    claims = jwt.decode(token_file.read_text().strip(), key, algorithms=["HS256"])
    assert claims == {"sub": "widehouse-admin"}
    conf = (secured.state_dir / "services" / "pulsar" / "conf" / "standalone.conf").read_text()
    assert f"tokenSecretKey=file://{key_file}" in conf
    assert "authorizationEnabled=true" in conf


def test_admin_calls_work_with_the_superuser_token_and_grants_reach_the_broker(
    secured: Settings, ns: str
) -> None:
    topic = f"persistent://{ns}/granted"
    with PulsarAdmin(secured.pulsar) as admin:
        admin.create_partitioned_topic(topic, 2)
        assert admin.partition_count(topic) == 2
        admin.grant_permission(ns, "app-1", ["produce", "consume"])
        assert sorted(admin.permissions(ns)["app-1"]) == ["consume", "produce"]
    # the granted role reads the topic's partitions; a role granted nothing is refused
    app = as_token(secured, role_token(secured, "app-1"))
    with PulsarAdmin(app.pulsar) as admin:
        assert admin.partition_count(topic) == 2


def test_admin_without_a_token_fails_at_once_naming_the_namespace(secured: Settings, ns: str) -> None:
    with PulsarAdmin(as_token(secured, None).pulsar) as admin:
        message = refused(PulsarAuthenticationError, lambda: admin.list_topics(ns), names=ns, token=None)
    assert "no Pulsar token is set" in message and "WIDEHOUSE_PULSAR_AUTH_TOKEN" in message


def test_a_token_of_another_key_is_refused_as_unauthenticated(secured: Settings, ns: str) -> None:
    forged = tokens.make_token(b"k" * 32, "widehouse-admin")
    with PulsarAdmin(as_token(secured, forged).pulsar) as admin:
        message = refused(PulsarAuthenticationError, lambda: admin.list_topics(ns), names=ns, token=forged)
    assert "role 'widehouse-admin'" in message


def test_a_role_without_permission_is_refused_naming_role_and_namespace(secured: Settings, ns: str) -> None:
    token = role_token(secured, "stranger")
    with PulsarAdmin(as_token(secured, token).pulsar) as admin:
        message = refused(PulsarAuthorizationError, lambda: admin.list_topics(ns), names=ns, token=token)
    assert "role 'stranger'" in message and "not authorized" in message
    # the binary protocol too: a producer is refused at once, naming the topic
    topic = f"persistent://{ns}/closed"
    stranger = as_token(secured, token).pulsar
    producers = Producers(stranger)
    try:
        message = refused(
            PulsarAuthorizationError,
            lambda: producers.send(topic, "p", [Outgoing(1, b"x", {})]),
            names=topic,
            token=token,
        )
    finally:
        producers.close()
    assert "role 'stranger'" in message


@pytest.mark.parametrize("credentials", ["none", "forged"])
def test_a_client_without_an_accepted_token_fails_at_once_naming_the_topic(
    secured: Settings, ns: str, credentials: str
) -> None:
    """Without the check in ``connect`` the C++ client retries the refused handshake for 30 s and
    then says only "TimeOut"."""
    token = None if credentials == "none" else tokens.make_token(b"k" * 32, "widehouse-admin")
    topic = f"persistent://{ns}/closed"
    producers = Producers(as_token(secured, token).pulsar)
    try:
        refused(
            PulsarAuthenticationError,
            lambda: producers.send(topic, "p", [Outgoing(1, b"x", {})]),
            names=topic,
            token=token,
        )
    finally:
        producers.close()


def test_an_expired_token_is_reported_as_expired_before_any_request(secured: Settings, ns: str) -> None:
    token = role_token(secured, "widehouse-admin", ttl=-60)  # the superuser's role, but expired
    settings = as_token(secured, token)
    with PulsarAdmin(settings.pulsar) as admin:
        message = refused(PulsarTokenExpiredError, lambda: admin.list_topics(ns), names=ns, token=token)
    assert "role 'widehouse-admin', expired at" in message
    refused(
        PulsarTokenExpiredError,
        lambda: pulsar_client.connect(settings.pulsar),
        names=settings.pulsar.service_url,
        token=token,
    )


def test_a_token_that_expires_while_publishing_is_reported_as_expired(secured: Settings, ns: str) -> None:
    """The broker re-checks connected clients' tokens every few seconds and drops an expired one; the
    producer's next sends time out, and that is reported as the expiry, not retried."""
    topic = f"persistent://{ns}/expiring"
    token = role_token(secured, "widehouse-admin", ttl=4)
    producers = Producers(as_token(secured, token).pulsar, send_timeout_seconds=3)
    sent = 0

    def send_until_refused() -> None:
        nonlocal sent
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            sent += producers.send(topic, "p", [Outgoing(sent + 1, b"x", {})])
            time.sleep(0.5)

    try:
        with pytest.raises(PulsarTokenExpiredError) as caught:
            send_until_refused()
    finally:
        producers.close()
    assert sent >= 1  # it worked while the token was valid
    assert topic in str(caught.value) and "expired at" in str(caught.value)
    assert token not in str(caught.value)


# -- the generator ---------------------------------------------------------------------------------
def test_generator_publishes_with_the_token_and_a_stranger_is_refused(secured: Settings) -> None:
    catalog = load_catalog(ROOT / "schemas")
    suffix = f"auth{uuid.uuid4().hex[:6]}"
    options = GenerateOptions(
        count=300, rate=0, seed=3, users=5, topics="/app/click$", tenant_suffix=suffix, create_topics=True
    )
    manifest = generate(secured, options, catalog)
    assert manifest.data["run"]["sent"] == 300 and manifest.data["run"]["failed"] == 0
    (published,) = [manifest.published_name(t) for t in manifest.topics]
    with PulsarAdmin(secured.pulsar) as admin:
        stats = admin.stats(published)
    assert stats["msgInCounter"] == 300
    namespace = published.removeprefix("persistent://").rsplit("/", 1)[0]
    token = role_token(secured, "stranger")
    refused(
        PulsarAuthorizationError,
        lambda: generate(as_token(secured, token), options, catalog),
        names=namespace,
        token=token,
    )


# -- the Spark sink and source -------------------------------------------------------------------
@pytest.mark.spark
def test_sink_and_source_work_with_the_token_and_a_stranger_is_refused(
    spark: Any, secured: Settings, ns: str, tmp_path: Path
) -> None:
    from widehouse.contracts.identity import subscription_name
    from widehouse.source import register, source_options

    register(spark)
    topic = f"persistent://{ns}/rows"
    with PulsarAdmin(secured.pulsar) as admin:
        admin.create_partitioned_topic(topic, 2)
    pulsar = secured.pulsar
    sent = [(f"m{i}", f"k{i}") for i in range(20)]
    # the sink: producers and its deduplication check (admin REST on the executors) with the token
    spark.createDataFrame(sent, "value string, __key string").repartition(2).write.format("pulsar").mode(
        "append"
    ).options(serviceUrl=pulsar.service_url, adminUrl=pulsar.admin_url, authToken=pulsar.auth_token).option(
        "topic", topic
    ).save()
    # a batch read
    rows = spark.read.format("pulsar").options(**source_options(pulsar, [topic])).load().collect()
    assert sorted(r.value.decode() for r in rows) == sorted(v for v, _ in sent)
    # a stream keeps its durable subscription on every partition
    query = (
        spark.readStream.format("pulsar")
        .options(**source_options(pulsar, [topic], appId="auth-app", startingOffsets="earliest"))
        .load()
        .writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None, query.exception()
    assert spark.read.parquet(str(tmp_path / "out")).count() == 20
    with PulsarAdmin(pulsar) as admin:
        for partition in (f"{topic}-partition-0", f"{topic}-partition-1"):
            assert subscription_name("auth-app") in admin.subscriptions(partition)
    # a role without permission: the read fails naming the topic's namespace and the role
    token = role_token(secured, "stranger")
    stranger = dataclasses.replace(pulsar, auth_token=token)
    with pytest.raises(Exception) as caught:  # noqa: PT011 - Spark wraps the source's error
        spark.read.format("pulsar").options(**source_options(stranger, [topic])).load().collect()
    message = str(caught.value)
    assert "not authorized" in message and "role 'stranger'" in message and ns in message
    assert token not in message


# -- the planner and the subscriptions' upkeep ---------------------------------------------------
def test_planner_live_stats_apply_and_lag_with_the_token_and_refused_without(
    secured: Settings, ns: str, tmp_path: Path
) -> None:
    from widehouse.planner.apply import apply_partitions
    from widehouse.planner.io import plan_from_dict
    from widehouse.planner.live import TopicSelection, live_traffic
    from widehouse.planner.observations import ObservationStore
    from widehouse.source.broker import BrokerView
    from widehouse.source.cleanup import scan

    topic = f"persistent://{ns}/planned"
    group = {"name": "g1", "topics": [topic], "load": 1.0, "cores": 1}
    plan = plan_from_dict({"groups": [group], "partitions": {topic: 3}})
    changes = apply_partitions(secured.pulsar, plan)
    assert [(c.topic, c.after) for c in changes] == [(topic, 3)]
    selection = TopicSelection(namespaces=(ns,))
    traffic = live_traffic(secured.pulsar, ObservationStore(tmp_path), selection, window=1)
    assert [(t.topic, t.partitions) for t in traffic] == [(topic, 3)]
    view = BrokerView(secured.pulsar)
    try:
        assert scan(view, [ns]) == []  # no app subscribed yet: nothing to clean, no lag
    finally:
        view.close()
    token = role_token(secured, "stranger")
    stranger = as_token(secured, token).pulsar
    refused(PulsarAuthorizationError, lambda: apply_partitions(stranger, plan), names=ns, token=token)
    store = ObservationStore(tmp_path)
    refused(
        PulsarAuthorizationError,
        lambda: live_traffic(stranger, store, selection, window=1),
        names=ns,
        token=token,
    )


@pytest.mark.spark
def test_a_stream_whose_token_expires_fails_with_the_expiry(
    spark: Any, secured: Settings, ns: str, tmp_path: Path
) -> None:
    """A running stream whose token expires stops with the expiry named on the next trigger (the
    app's restart book then gives it up: see tests/unit/test_pulsar_tokens.py)."""
    from widehouse.source import register, source_options

    register(spark)
    topic = f"persistent://{ns}/live"
    with PulsarAdmin(secured.pulsar) as admin:
        admin.create_partitioned_topic(topic, 1)
    client = pulsar_client.connect(secured.pulsar)
    try:
        publish(client, topic, 5)
    finally:
        client.close()
    token = role_token(secured, "widehouse-admin", ttl=6)
    pulsar = dataclasses.replace(secured.pulsar, auth_token=token)
    batches: list[int] = []
    query = (
        spark.readStream.format("pulsar")
        .options(**source_options(pulsar, [topic], appId="expiring", startingOffsets="earliest"))
        .load()
        .writeStream.foreachBatch(lambda df, batch_id: batches.append(batch_id))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="1 second")
        .start()
    )
    try:
        with pytest.raises(Exception) as caught:  # noqa: PT011 - Spark's StreamingQueryException
            query.awaitTermination(45)  # returns False (no raise) if the stream kept running
    finally:
        query.stop()
    assert batches, "the stream ran while its token was valid"
    message = str(caught.value)
    assert "PulsarTokenExpiredError" in message and "expired at" in message
    assert token not in message


# -- the watermark trigger -----------------------------------------------------------------------
def _trigger_events(
    secured: Settings, ns: str, token: str | None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Any:
    """The first event of a watermark trigger over ``ns``'s control topic, read with ``token``."""
    import asyncio

    from widehouse.orchestration.pulsar_trigger import PulsarWatermarkTrigger

    env = {
        "WIDEHOUSE_STATE_DIR": str(tmp_path),
        "WIDEHOUSE_PULSAR_SERVICE_URL": secured.pulsar.service_url,
        "WIDEHOUSE_PULSAR_ADMIN_URL": secured.pulsar.admin_url,
        "WIDEHOUSE_STREAM_CONTROL_TOPIC": f"persistent://{ns}/watermarks",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    if token is None:
        monkeypatch.delenv("WIDEHOUSE_PULSAR_AUTH_TOKEN", raising=False)
    else:
        monkeypatch.setenv("WIDEHOUSE_PULSAR_AUTH_TOKEN", token)
    trigger = PulsarWatermarkTrigger(
        table="user_hourly", start_hour="2026-11-22T09:00:00+00:00", use_ledger=False, poll_seconds=1.0
    )

    async def first() -> Any:
        events = trigger.run()
        try:
            return await asyncio.wait_for(events.__anext__(), timeout=30)
        finally:
            await events.aclose()

    return lambda: asyncio.run(first())


def test_the_watermark_trigger_is_refused_at_once_naming_the_control_topic(
    secured: Settings, ns: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    topic = f"persistent://{ns}/watermarks"
    token = role_token(secured, "stranger")
    run = _trigger_events(secured, ns, token, monkeypatch, tmp_path)
    refused(PulsarAuthorizationError, run, names=topic, token=token)
    run = _trigger_events(secured, ns, None, monkeypatch, tmp_path)
    refused(PulsarAuthenticationError, run, names=topic, token=None)


def test_the_watermark_trigger_reports_a_token_that_expires_while_it_waits(
    secured: Settings, ns: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Without the check its reads would time out as "no events yet" forever."""
    topic = f"persistent://{ns}/watermarks"
    token = role_token(secured, "widehouse-admin", ttl=6)  # valid when the trigger opens its reader
    run = _trigger_events(secured, ns, token, monkeypatch, tmp_path)
    with pytest.raises(PulsarTokenExpiredError) as caught:
        run()
    assert topic in str(caught.value) and "expired at" in str(caught.value)
    assert token not in str(caught.value)


# -- the dead-letter forwarding and the subscriptions' cleanup -----------------------------------
def test_dead_letters_are_forwarded_with_the_token_and_a_stranger_is_refused(
    secured: Settings, ns: str
) -> None:
    import datetime as dt

    import pyarrow as pa

    from widehouse.stream.deadletter import DeadLetterPublisher, dead_letter_topic

    origin = f"persistent://{ns}/clicks"
    quarantine = pa.Table.from_pylist(
        [
            {
                "topic": origin,
                "message_id": f"7:{i}:-1:-1",
                "payload": b'{"broken": ',
                "payload_bytes": 11,
                "publish_time": dt.datetime(2026, 11, 22, 12, tzinfo=dt.UTC),
                "reason": "bad-json",
                "detail": "unexpected end",
            }
            for i in range(3)
        ]
    )
    producers = Producers(secured.pulsar)
    try:
        sent = DeadLetterPublisher(producers, "authapp", "g0").publish(quarantine, batch_id=1)
    finally:
        producers.close()
    dlq = dead_letter_topic(origin)
    assert sent == {dlq: 3}
    with PulsarAdmin(secured.pulsar) as admin:
        assert admin.stats(dlq)["msgInCounter"] == 3
    token = role_token(secured, "stranger")

    def forward_as_stranger() -> None:
        strangers = Producers(as_token(secured, token).pulsar)
        try:
            DeadLetterPublisher(strangers, "authapp", "g0").publish(quarantine, batch_id=2)
        finally:
            strangers.close()

    refused(PulsarAuthError, forward_as_stranger, names=ns, token=token)


def test_cleanup_deletes_a_dead_subscription_with_the_token_and_a_stranger_is_refused(
    secured: Settings, ns: str
) -> None:
    from widehouse.source.broker import BrokerView
    from widehouse.source.cleanup import cleanup

    topic = f"persistent://{ns}/swept-partition-0"
    with PulsarAdmin(secured.pulsar) as admin:
        admin.ensure_partitions(f"persistent://{ns}/swept", 1)
        assert admin.create_subscription(topic, "widehouse-gone", None)  # no heartbeat: dead
        token = role_token(secured, "stranger")
        stranger = BrokerView(as_token(secured, token).pulsar)
        try:
            refused(PulsarAuthError, lambda: cleanup(stranger, [ns], ttl_s=60), names=ns, token=token)
        finally:
            stranger.close()
        assert admin.subscriptions(topic) == ["widehouse-gone"]  # the refused sweep removed nothing
        view = BrokerView(secured.pulsar)
        try:
            verdicts = cleanup(view, [ns], ttl_s=60)
        finally:
            view.close()
        assert [(v.subscription.subscription, v.remove) for v in verdicts] == [("widehouse-gone", True)]
        assert admin.subscriptions(topic) == []

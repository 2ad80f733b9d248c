"""The watermark event trigger's ``run()`` against real Pulsar, fed hand-published control messages.

No Airflow scheduler: the coroutine is driven directly, as the triggerer would. It must stay quiet
while a feeding group is short of hour end + lateness and fire once both are past it.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.integration.stream_support import Deployment
from widehouse.orchestration.pulsar_trigger import PulsarWatermarkTrigger
from widehouse.pulsar import PulsarAdmin
from widehouse.pulsar import client as pulsar_client
from widehouse.settings import Settings
from widehouse.stream.control import WatermarkEvent

pytestmark = [pytest.mark.integration]

LOGIN = "persistent://bigolive/app/login"  # feeds user_hourly
H9 = dt.datetime(2026, 11, 22, 9, tzinfo=dt.UTC)
NEEDED_MS = int(dt.datetime(2026, 11, 22, 11, tzinfo=dt.UTC).timestamp() * 1000)  # 09 + 1 h + lateness 1 h


def test_the_trigger_fires_when_every_group_passed_the_hour_and_not_before(
    services: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deployment = Deployment(tmp_path, suffix="t" + uuid.uuid4().hex[:7])
    for name, value in deployment.env.items():
        if name.startswith("WIDEHOUSE_") and os.environ.get(name) != value:
            monkeypatch.setenv(name, value)
    topic = f"persistent://widehouse-{deployment.suffix}/control/watermarks"
    login = str(next(t.name for t in deployment.catalog.topics if t.origin == LOGIN))
    with PulsarAdmin(deployment.settings.pulsar) as admin:
        admin.ensure_namespace(topic.split("://", 1)[1].rsplit("/", 1)[0])
    client = pulsar_client.connect(deployment.settings.pulsar)
    producer = client.create_producer(topic)

    def send(group: str, batch: int, at_ms: int, app: str = "widehouse") -> None:
        producer.send(WatermarkEvent(app, group, batch, at_ms, (login,)).to_json())

    # no plan file: the feeding groups are those whose events name a user_hourly topic
    send("g001", 0, NEEDED_MS + 5_000)
    send("g002", 0, NEEDED_MS - 1)  # 1 ms short
    send("g002", 1, NEEDED_MS + 60_000, app="another-app")  # not ours

    trigger = PulsarWatermarkTrigger(
        table="user_hourly", start_hour=H9.isoformat(), use_ledger=False, poll_seconds=1.0
    )

    async def scenario() -> tuple[list[Any], Any]:
        events = trigger.run()
        first = asyncio.ensure_future(events.__anext__())
        done, _ = await asyncio.wait({first}, timeout=8)
        quiet = list(done)
        await asyncio.to_thread(send, "g002", 1, NEEDED_MS)  # now both groups are past 11:00
        fired = await asyncio.wait_for(first, timeout=60)
        await events.aclose()
        return quiet, fired

    try:
        quiet, fired = asyncio.run(scenario())
    finally:
        producer.close()
        client.close()
    assert quiet == []  # not before g002 passed hour end + lateness
    assert fired.payload == {
        "table": "user_hourly",
        "app": "widehouse",
        "hours": ["2026-11-22T09:00:00+00:00"],
        "needed": "2026-11-22T11:00:00+00:00",
        "watermarks": {"g001": "2026-11-22T11:00:05+00:00", "g002": "2026-11-22T11:00:00+00:00"},
    }

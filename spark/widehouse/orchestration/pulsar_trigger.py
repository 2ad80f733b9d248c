"""An Airflow event trigger on the streams' watermark events in Pulsar (usable in an ``AssetWatcher``).

:class:`PulsarWatermarkTrigger` reads the control topic (``WIDEHOUSE_STREAM_CONTROL_TOPIC``, see
:mod:`widehouse.stream.control`) with a Pulsar reader and fires a ``TriggerEvent`` as soon as every
slot group feeding ``table`` has passed hour end + lateness for the next unfinalized hour, never
before (the decision is :class:`~widehouse.orchestration.watermark_watch.HourWatch`, the finalize
gate's rule). The payload names the hours that became final (up to ``max_hours`` per event, in
order); the event-driven DAG ``widehouse_hourly_events`` finalizes them.

Where it starts: the next unfinalized hour is the first hour from ``start_hour`` without a ledger
row (``finalized_periods`` in ClickHouse) when ``use_ledger``, else ``start_hour``; it then moves on
in memory after each firing (a triggerer restart asks the ledger again, so an hour whose finalize
failed is handed out again then). The reader starts at ``position`` (``earliest``: the whole
retained topic, which rebuilds every group's newest watermark; ``latest``: only new events) and
reads compacted data when the topic has been compacted (events are keyed ``<app>/<group>``).

The blocking pulsar client runs in threads (``asyncio.to_thread``); settings come from the
triggerer's ``WIDEHOUSE_*`` environment (like the streams'), the plan from ``<state>/plan.json``.
This is the only module that imports Airflow's trigger classes; it imports no pyspark.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from widehouse.errors import ConfigError
from widehouse.orchestration.watermark_watch import HourWatch, first_unfinalized
from widehouse.stream.control import WatermarkEvent, control_topic

log = logging.getLogger(__name__)

POSITIONS = ("earliest", "latest")


class PulsarWatermarkTrigger(BaseEventTrigger):
    """Fires when the next unfinalized hour of ``table`` is final in every feeding group."""

    def __init__(
        self,
        table: str,
        start_hour: str,
        *,
        position: str = "earliest",
        use_ledger: bool = True,
        poll_seconds: float = 5.0,
        max_hours: int = 24,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if position not in POSITIONS:
            raise ConfigError(f"position={position!r} must be one of {', '.join(POSITIONS)}")
        if poll_seconds <= 0 or max_hours < 1:
            raise ConfigError(f"poll_seconds={poll_seconds!r} and max_hours={max_hours!r} must be positive")
        self.table = table
        self.start_hour = start_hour
        self.position = position
        self.use_ledger = use_ledger
        self.poll_seconds = float(poll_seconds)
        self.max_hours = int(max_hours)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "table": self.table,
                "start_hour": self.start_hour,
                "position": self.position,
                "use_ledger": self.use_ledger,
                "poll_seconds": self.poll_seconds,
                "max_hours": self.max_hours,
            },
        )

    # -- blocking parts (run in threads) ------------------------------------------------------
    def _prepare(self) -> tuple[Any, HourWatch, str]:
        from widehouse.contracts.periods import parse_hour
        from widehouse.orchestration.tasks import deployment_catalog
        from widehouse.settings import load_settings

        settings = load_settings()
        catalog = deployment_catalog(settings)
        topic = control_topic(settings.stream)
        if topic is None:
            raise ConfigError(
                "WIDEHOUSE_STREAM_CONTROL_TOPIC is empty: the streams publish no watermark events"
            )
        start = parse_hour(self.start_hour, "start_hour")
        if self.use_ledger:
            start = self._next_from_ledger(settings, start)
        watch = HourWatch(catalog, self.table, settings.stream.app, start, self.max_hours)
        return settings, watch, topic

    def _next_from_ledger(self, settings: Any, start: dt.datetime) -> dt.datetime:
        from widehouse import clickhouse
        from widehouse.batch import ledger

        now = dt.datetime.now(dt.UTC)
        client = clickhouse.connect(settings.clickhouse)
        try:
            ledger.ensure(client)
            done = ledger.published(client, self.table, start, now)
        finally:
            client.close()
        return first_unfinalized(start, done, now)

    def _open(self, settings: Any, topic: str) -> tuple[Any, Any]:
        import pulsar

        from widehouse.pulsar.auth import PulsarAuthError, client_error
        from widehouse.pulsar.client import connect

        subject = f"cannot read the control topic {topic}"
        try:
            client = connect(settings.pulsar)
        except PulsarAuthError as exc:  # refused credentials: say which topic needed them
            raise type(exc)(f"{subject}: {exc}") from exc
        start = pulsar.MessageId.earliest if self.position == "earliest" else pulsar.MessageId.latest
        try:
            reader = client.create_reader(topic, start, is_read_compacted=True)
        except Exception as exc:  # the C++ client raises its own exception types
            client.close()
            refused = client_error(subject, exc, settings.pulsar)
            if refused is not None:
                raise refused from exc
            raise ConfigError(f"{subject}: {exc}") from exc
        return client, reader

    def _drain(self, reader: Any, token: str | None = None, limit: int = 10_000) -> list[WatermarkEvent]:
        """Events available now (waits up to ``poll_seconds`` for the first); bad messages skipped.

        A wait that times out with an expired ``token`` raises: the broker dropped the reader's
        connection, so the trigger would otherwise wait, silently, forever."""
        import pulsar

        from widehouse.pulsar.auth import expired_error

        events: list[WatermarkEvent] = []
        timeout = int(self.poll_seconds * 1000)
        while len(events) < limit:
            try:
                message = reader.read_next(timeout_millis=timeout)
            except pulsar.Timeout:
                expired = expired_error(f"reading the control topic {reader.topic()}", token)
                if expired is not None:
                    raise expired from None
                break
            timeout = 50  # after the first message, take only what is already there
            try:
                events.append(WatermarkEvent.from_json(message.data()))
            except ValueError as exc:
                log.warning("skipping control message %s: %s", message.message_id(), exc)
        return events

    def _plan_groups(self, watch: HourWatch, settings: Any) -> list[str] | None:
        from widehouse.batch.gate import feeding_groups

        return feeding_groups(watch.catalog, self.table, settings.state_dir / "plan.json")

    # -- the trigger --------------------------------------------------------------------------
    async def run(self) -> AsyncIterator[TriggerEvent]:
        settings, watch, topic = await asyncio.to_thread(self._prepare)
        client, reader = await asyncio.to_thread(self._open, settings, topic)
        self.log.info("watching %s for %s from %s", topic, self.table, watch.next_hour.isoformat())
        try:
            while True:
                for event in await asyncio.to_thread(self._drain, reader, settings.pulsar.auth_token):
                    watch.observe(event)
                groups = await asyncio.to_thread(self._plan_groups, watch, settings)
                hours = watch.ready_hours(groups)
                if hours:
                    payload = watch.payload(hours, groups)
                    self.log.info("%s: final hours %s", self.table, payload["hours"])
                    yield TriggerEvent(payload)
                    watch.advance(hours)
        finally:
            await asyncio.to_thread(client.close)

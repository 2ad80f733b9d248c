"""Durable subscriptions of streaming apps: one per app and topic-partition, moved on commit.

Naming: ``<prefix><appId>`` (prefix ``widehouse-`` by default) on every partition an app reads.
The subscription is not how the app reads (offsets live in the Spark checkpoint, reads use
readers); it is how Pulsar learns what the app has processed, so backlog and retention follow the
app: data the app has not committed is never deleted, data it has is released.

While the app runs, :class:`SubscriptionKeeper` holds one **zero-queue** consumer per partition on
the subscription (Failover, so a restarting instance never gets ``ConsumerBusy``). Zero-queue
means the broker dispatches nothing; the consumer serves to

- move the subscription with a cumulative ack (binary protocol, no REST call per commit),
- ask for the partition's last message id (cheap change detection for 1,000s of partitions),
- show the app as attached in topic stats (``widehouse pulsar cleanup`` keeps attached ones).

Subscriptions are set up beside the triggers (:meth:`SubscriptionKeeper.attach_soon`): missing ones
created and existing ones moved to where the run starts, with pipelined admin calls, then attached.
Until a partition's consumer attaches, its end is examined over REST and its commits wait to be
acked; nothing is read differently.

Each subscription carries properties ``widehouse.app`` and ``widehouse.heartbeat`` (epoch ms),
refreshed every heartbeat interval while the app runs. ``widehouse pulsar cleanup`` removes
subscriptions with no consumer and a heartbeat older than its TTL (see :mod:`.cleanup`).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

from widehouse.contracts.identity import SUBSCRIPTION_PREFIX, subscription_name, validate_app_id
from widehouse.errors import PulsarError
from widehouse.pulsar import bulk
from widehouse.pulsar.admin import (
    CursorResetRefusedError,
    SubscriptionBusyError,
    TopicNotFoundError,
    create_subscription_request,
    reset_cursor_request,
    reset_cursor_to_time_request,
    subscription_properties_request,
)
from widehouse.pulsar.positions import Mark, Position, TopicPartition
from widehouse.settings import PulsarSettings
from widehouse.source.broker import BrokerView

log = logging.getLogger(__name__)

PROP_APP = "widehouse.app"
PROP_HEARTBEAT = "widehouse.heartbeat"
PROP_HOST = "widehouse.host"
_WAIT_S = 30.0


def heartbeat_properties(app_id: str, now_ms: int | None = None) -> dict[str, str]:
    now = int(time.time() * 1000) if now_ms is None else now_ms
    return {PROP_APP: app_id, PROP_HEARTBEAT: str(now), PROP_HOST: f"{socket.gethostname()}:{os.getpid()}"}


def cursor_target(mark: Mark) -> tuple[Position, bool] | None:
    """Where to reset a subscription for ``mark``: (position, excluded); None for earliest.

    A whole-entry mark is exact (excluded: consumed through the entry). A mark inside a batch
    entry keeps the entry unconsumed (the subscription may lag by part of one entry, never lead).
    """
    if mark.position is None:
        return None
    position = Position(mark.position.ledger, mark.position.entry)
    return position, mark.position.batch < 0


def ack_target(mark: Mark) -> Position | None:
    """The whole entry a cumulative ack may cover for ``mark`` (None: nothing safe to ack)."""
    if mark.position is None:
        return None
    if mark.position.batch < 0:
        return Position(mark.position.ledger, mark.position.entry)
    if mark.position.entry > 0:
        return Position(mark.position.ledger, mark.position.entry - 1)
    return None


class RetryLog:
    """How many triggers in a row a step has failed on each partition, so that a failure that
    lasts is logged as a warning when it starts and at every tenfold count of tries (1, 10, 100,
    ...), at debug level in between, and at info once it passes: one line per trigger at most,
    however many partitions fail (a broker that refuses for minutes fails them all each trigger)."""

    SAMPLE = 5

    def __init__(self, step: str) -> None:
        self.step = step
        self.tries: dict[TopicPartition, int] = {}

    def report(self, failed: Mapping[TopicPartition, object], passed: Iterable[TopicPartition]) -> None:
        """Count the tries of ``failed`` (partition -> its error), forget ``passed``, and log."""
        recovered = [self.tries.pop(tp) for tp in passed if tp in self.tries]
        if recovered:
            log.info(
                "%s passed on %d partition(s) after up to %d failed tries",
                self.step,
                len(recovered),
                max(recovered),
            )
        if not failed:
            return
        for tp in failed:
            self.tries[tp] = self.tries.get(tp, 0) + 1
        order = sorted(failed)
        due = [tp for tp in order if _tenfold(self.tries[tp])]
        shown = (due or order)[: self.SAMPLE]
        sample = "; ".join(f"{tp} (try {self.tries[tp]}): {failed[tp]}" for tp in shown)
        level = logging.WARNING if due else logging.DEBUG
        log.log(
            level, "%s failed on %d partition(s), retried next trigger: %s", self.step, len(failed), sample
        )

    def forget(self, parts: Iterable[TopicPartition]) -> None:
        for tp in parts:
            self.tries.pop(tp, None)


def _tenfold(n: int) -> bool:
    """1, 10, 100, ...: the tries at which a lasting failure is logged again."""
    while n >= 10 and n % 10 == 0:
        n //= 10
    return n == 1


class SubscriptionKeeper:
    """The durable subscriptions of one running app (see the module docstring)."""

    def __init__(
        self,
        settings: PulsarSettings,
        app_id: str,
        view: BrokerView,
        prefix: str = SUBSCRIPTION_PREFIX,
        heartbeat_interval_s: float = 600.0,
    ) -> None:
        self.settings = settings
        self.app_id = validate_app_id(app_id)
        self.name = subscription_name(app_id, prefix)
        self.view = view
        self.heartbeat_interval_s = heartbeat_interval_s
        self._client: Any = None
        self._consumers: dict[TopicPartition, Any] = {}
        self._acked: dict[TopicPartition, tuple[int, int, int]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._heartbeat: threading.Thread | None = None
        self._unset = RetryLog(f"setting up subscription {self.name}")
        self._unattached = RetryLog(f"attaching a consumer of {self.name}")
        self._committed: dict[TopicPartition, Mark] = {}
        """The last committed mark of every partition, attached or not (acked once attached)."""
        self._pending: Future[None] | None = None
        self._attacher: ThreadPoolExecutor | None = None

    # -- attach / detach ----------------------------------------------------------------------
    @property
    def attached(self) -> set[TopicPartition]:
        with self._lock:
            return set(self._consumers)

    def attach(self, marks: Mapping[TopicPartition, Mark]) -> None:
        """Create (or reset to ``mark``) the subscription of each new partition and attach to it."""
        new = sorted(tp for tp in marks if tp not in self._consumers)
        if not new:
            return
        props = heartbeat_properties(self.app_id)
        unset: dict[TopicPartition, Exception] = {}
        lock = threading.Lock()

        def prepare(tp: TopicPartition) -> TopicPartition | None:
            admin = self.view.admin()
            target = cursor_target(marks[tp])
            try:
                created = admin.create_subscription(tp.name, self.name, target[0] if target else None, props)
                if created:
                    return tp
                # it exists (an earlier run of the app): move it to where this run starts, so the
                # data this run still has to read is retained, and mark it alive
                if target is None:
                    admin.reset_cursor_to_time(tp.name, self.name, 0)
                else:
                    admin.reset_cursor(tp.name, self.name, target[0], excluded=target[1])
                admin.update_subscription_properties(tp.name, self.name, props)
            except TopicNotFoundError:
                log.info("%s vanished before subscription %s could be set up", tp, self.name)
                return None
            except (SubscriptionBusyError, CursorResetRefusedError) as exc:
                # left unattached: the next trigger tries again; the query goes on reading meanwhile
                # (it reads with readers from the checkpoint's offsets; the subscription only holds
                # retention, and stays where the app's last commit moved it until then)
                with lock:
                    unset[tp] = exc
                return None
            return tp

        created, existing = self._create_pipelined(new, marks, props)
        moved = self._move_pipelined(existing, marks, props)
        done = set(created) | set(moved)
        rest = [tp for tp in new if tp not in done]
        ready = created + moved + [tp for tp in self.view.map(prepare, rest) if tp is not None]
        self._unset.report(unset, ready)
        consumers = self._subscribe(ready)
        with self._lock:
            self._consumers.update(consumers)
            for tp in consumers:
                target = ack_target(marks[tp])
                if target is not None:
                    self._acked[tp] = target.key()
        self._start_heartbeat()

    def attach_soon(self, marks: Mapping[TopicPartition, Mark]) -> None:
        """:meth:`attach` the partitions not attached yet, on the keeper's own thread, so that a
        trigger does not wait while the broker sets up thousands of subscriptions (1,000 new ones
        took ~3.4 s of a 1,000-topic app's start here, before its first batch was planned).

        The subscriptions hold retention and show the app's backlog; the query reads with readers
        and needs none of them to plan or read. While one set-up runs, later calls do nothing (the
        first trigger after it asks for what is still missing); its error, such as a refused token,
        is raised by the next call. A commit made meanwhile is acked once its partition attaches.
        """
        with self._lock:
            pending = self._pending
            if pending is not None and not pending.done():
                return
            self._pending = None
            new = {tp: mark for tp, mark in marks.items() if tp not in self._consumers}
        if pending is not None:
            pending.result()  # the last set-up's error is this trigger's
        if not new:
            return
        if self._attacher is None:
            self._attacher = ThreadPoolExecutor(1, thread_name_prefix="widehouse-subscriptions")
        future = self._attacher.submit(self._attach_and_catch_up, new)
        with self._lock:
            self._pending = future

    def _attach_and_catch_up(self, marks: Mapping[TopicPartition, Mark]) -> None:
        self.attach(marks)
        with self._lock:
            committed = {tp: self._committed[tp] for tp in marks if tp in self._committed}
        if committed:
            self.commit(committed)

    def settle(self) -> None:
        """Wait for a set-up :meth:`attach_soon` started; raises its error (and forgets it)."""
        with self._lock:
            pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()

    def _wait_pending(self) -> None:
        """Wait for a running set-up, leaving its outcome for the next :meth:`attach_soon`."""
        with self._lock:
            pending = self._pending
        if pending is not None:
            wait([pending])

    def _create_pipelined(
        self, parts: list[TopicPartition], marks: Mapping[TopicPartition, Mark], props: dict[str, str]
    ) -> tuple[list[TopicPartition], list[TopicPartition]]:
        """The partitions whose subscription a pipelined create made (:mod:`widehouse.pulsar.bulk`),
        and those where it already existed (409: an earlier run's). The others (no such topic, an
        error) are prepared one by one."""
        if len(parts) < 2:
            return [], []
        calls = []
        for tp in parts:
            target = cursor_target(marks[tp])
            calls.append(
                create_subscription_request(tp.name, self.name, target[0] if target else None, props)
            )
        answers = self.view.admin().pipelined(calls, self.view.concurrency)
        if answers is None:
            return [], []
        pairs = list(zip(parts, answers, strict=True))
        created = [tp for tp, answer in pairs if _status(answer) in (200, 204)]
        return created, [tp for tp, answer in pairs if _status(answer) == 409]

    def _move_pipelined(
        self, parts: list[TopicPartition], marks: Mapping[TopicPartition, Mark], props: dict[str, str]
    ) -> list[TopicPartition]:
        """Existing subscriptions moved to where this run starts and marked alive, pipelined: every
        reset in one round, then the properties of those moved (a reset and a properties update of
        one subscription at once could race in the broker's cursor metadata). The partitions whose
        calls all answered 204; the others (busy, refused, vanished) are prepared one by one, which
        retries a busy reset and explains a refusal. One at a time, through the admin client, the
        2,000 calls of a restarted app of 1,000 partitions took ~2.9 s and ~2 core-s of its CPU."""
        if not parts:
            return []
        resets = []
        for tp in parts:
            target = cursor_target(marks[tp])
            resets.append(
                reset_cursor_to_time_request(tp.name, self.name, 0)
                if target is None
                else reset_cursor_request(tp.name, self.name, target[0], excluded=target[1])
            )
        admin = self.view.admin()
        answers = admin.pipelined(resets, self.view.concurrency)
        if answers is None:
            return []
        reset = [tp for tp, a in zip(parts, answers, strict=True) if _status(a) in (200, 204)]
        if not reset:
            return []
        calls = [subscription_properties_request(tp.name, self.name, props) for tp in reset]
        answers = admin.pipelined(calls, self.view.concurrency)
        if answers is None:
            return []
        return [tp for tp, a in zip(reset, answers, strict=True) if _status(a) in (200, 204)]

    def detach(self, parts: Iterable[TopicPartition]) -> None:
        """Close the consumers of partitions the app no longer reads (their subscription stays)."""
        parts = list(parts)
        if not parts:
            return
        self._wait_pending()  # a set-up still running may be attaching some of them
        self._unset.forget(parts)
        self._unattached.forget(parts)
        with self._lock:
            for tp in parts:
                self._committed.pop(tp, None)
            closing = [self._consumers.pop(tp) for tp in parts if tp in self._consumers]
        for consumer in closing:
            consumer.close_async(lambda _result: None)

    def _subscribe(self, parts: list[TopicPartition]) -> dict[TopicPartition, Any]:
        import _pulsar
        import pulsar

        client = self._ensure_client()
        results: dict[TopicPartition, Any] = {}
        done = threading.Event()
        lock = threading.Lock()

        def callback(tp: TopicPartition) -> Any:
            def on_subscribed(result: Any, consumer: Any) -> None:
                with lock:
                    results[tp] = consumer if result == _pulsar.Result.Ok else result
                    if len(results) == len(parts):
                        done.set()

            return on_subscribed

        for tp in parts:
            conf = _pulsar.ConsumerConfiguration()
            conf.consumer_type(pulsar.ConsumerType.Failover)
            conf.receiver_queue_size(0)
            conf.consumer_name(f"{self.app_id}@{socket.gethostname()}:{os.getpid()}")
            client.subscribe_async(tp.name, self.name, conf, callback(tp))
        if parts and not done.wait(_WAIT_S + len(parts) * 0.05):
            raise PulsarError(f"attaching subscription {self.name} to {len(parts)} partitions timed out")
        failed = {tp: r for tp, r in results.items() if not hasattr(r, "acknowledge_cumulative_async")}
        self._raise_if_refused(failed)
        # the subscriptions exist; the consumers that failed are retried on the next trigger
        attached = [tp for tp in parts if tp not in failed]
        self._unattached.report(failed, attached)
        return {tp: results[tp] for tp in attached}

    def _raise_if_refused(self, failed: Mapping[TopicPartition, Any]) -> None:
        """A consumer the broker refused (no or a rejected token, a role without permission, an
        expired token) is not retried on the next trigger: it would be refused again, forever."""
        from widehouse.pulsar.auth import client_error, expired_error

        for tp, result in sorted(failed.items()):
            subject = f"attaching subscription {self.name} to {tp}"
            refused: PulsarError | None
            if getattr(result, "name", "") in ("Timeout", "ConnectError"):
                # transient (retried next trigger) unless the token has expired
                refused = expired_error(subject, self.settings.auth_token)
            else:
                refused = client_error(subject, result, self.settings)
            if refused is not None:
                raise refused

    def _ensure_client(self) -> Any:
        if self._client is None:
            from widehouse.pulsar.client import connect

            self._client = connect(self.settings, io_threads=2)._client
        return self._client

    # -- reading state ------------------------------------------------------------------------
    def last_positions(self, parts: Iterable[TopicPartition]) -> dict[TopicPartition, Position]:
        """Last message position (whole entry) per attached partition; entry -1 when it is empty.

        Partitions without a consumer, or whose answer failed, are left out (unknown).
        """
        import _pulsar

        with self._lock:
            asked = {tp: self._consumers[tp] for tp in parts if tp in self._consumers}
        if not asked:
            return {}
        answers: dict[TopicPartition, Position] = {}
        pending = [len(asked)]
        done = threading.Event()
        lock = threading.Lock()

        def callback(tp: TopicPartition) -> Any:
            def on_last(result: Any, message_id: Any) -> None:
                with lock:
                    if result == _pulsar.Result.Ok:
                        answers[tp] = Position(message_id.ledger_id(), message_id.entry_id())
                    pending[0] -= 1
                    if pending[0] == 0:
                        done.set()

            return on_last

        for tp, consumer in asked.items():
            consumer.get_last_message_id_async(callback(tp))
        done.wait(_WAIT_S)
        with lock:
            return dict(answers)

    # -- commit -------------------------------------------------------------------------------
    def commit(self, marks: Mapping[TopicPartition, Mark]) -> int:
        """Move each partition's subscription forward to its mark (never back); returns acks sent.

        Acks are asynchronous: the subscription moves within the client's ack grouping time.
        """
        import _pulsar

        sent = 0
        with self._lock:
            self._committed.update(marks)
            for tp, mark in marks.items():
                target = ack_target(mark)
                consumer = self._consumers.get(tp)
                if target is None or consumer is None:
                    continue
                key = target.key()
                if key <= self._acked.get(tp, (-1, -1, -1)):
                    continue
                message_id = _pulsar.MessageId(tp.partition, target.ledger, target.entry, -1)
                consumer.acknowledge_cumulative_async(message_id, _ack_callback(self.name, tp))
                self._acked[tp] = key
                sent += 1
        return sent

    # -- heartbeat ----------------------------------------------------------------------------
    def _start_heartbeat(self) -> None:
        if self._heartbeat is None and self.heartbeat_interval_s > 0:
            self._heartbeat = threading.Thread(
                target=self._beat, name="widehouse-pulsar-heartbeat", daemon=True
            )
            self._heartbeat.start()

    def _beat(self) -> None:
        from widehouse.pulsar.admin import PulsarAdmin

        with PulsarAdmin(self.settings) as admin:
            while not self._stop.wait(self.heartbeat_interval_s):
                props = heartbeat_properties(self.app_id)
                for tp in sorted(self.attached):
                    if self._stop.is_set():
                        return
                    try:
                        admin.update_subscription_properties(tp.name, self.name, props)
                    except PulsarError as exc:  # a deleted topic, a broker restart: next beat retries
                        log.warning("heartbeat of %s on %s failed: %s", self.name, tp, exc)

    def close(self) -> None:
        """Wait for a set-up still running, stop heartbeats and close the consumers (flushing
        pending acks); subscriptions stay. A set-up's error nobody took is logged."""
        try:
            self.settle()
        except Exception as exc:  # the query ends anyway: its reads never depended on it
            log.warning("setting up subscription %s failed: %s", self.name, exc)
        if self._attacher is not None:
            self._attacher.shutdown(wait=True)
            self._attacher = None
        self._stop.set()
        with self._lock:
            consumers = list(self._consumers.values())
            self._consumers.clear()
        for consumer in consumers:
            try:
                consumer.close()
            except Exception as exc:  # closing is best effort: the broker drops them with the connection
                log.debug("closing a consumer of %s: %s", self.name, exc)
        if self._client is not None:
            try:
                self._client.close()
            except Exception as exc:
                log.debug("closing the Pulsar client: %s", exc)
            self._client = None


def _status(answer: bulk.Answer | Exception) -> int | None:
    """A pipelined call's HTTP status; None where no answer came."""
    return answer.status if isinstance(answer, bulk.Answer) else None


def _ack_callback(name: str, tp: TopicPartition) -> Any:
    import _pulsar

    def on_ack(result: Any) -> None:
        if result != _pulsar.Result.Ok:
            log.warning("moving subscription %s on %s failed: %s (the next commit retries)", name, tp, result)

    return on_ack

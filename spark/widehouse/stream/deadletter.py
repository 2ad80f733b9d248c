"""Dead-letter topics: every quarantined message, forwarded to its topic's ``<topic>-DLQ``.

With ``WIDEHOUSE_STREAM_DEAD_LETTER=true`` a slot group publishes, after a micro-batch is
committed (sinks and progress written), each row of the batch's quarantine table to a dead-letter
topic, so the producing team can subscribe to its own bad data:

* **Topic rule**: ``persistent://<tenant>/<namespace>/<local>-DLQ`` for origin topic
  ``persistent://<tenant>/<namespace>/<local>`` (a partition's rows go to its partitioned topic's
  DLQ). Non-partitioned, created on first write (the namespace must allow auto-creation, or create
  them up front). Pulsar's own consumer DLQs are ``<topic>-<subscription>-DLQ``; ours name no
  subscription because the stream's quarantine is not tied to one.
* **Message**: the payload as quarantined, i.e. **cut to the first 4 KiB**
  (``TransformPlan.payload_limit``); ``wh_payload_bytes`` gives the original size and
  ``wh_truncated`` says whether it was cut. Key = the origin message id, event time = the origin's
  publish time. Properties: ``wh_reason``, ``wh_detail``, ``wh_origin_topic``, ``wh_message_id``,
  ``wh_publish_time`` (epoch ms), ``wh_payload_bytes``, ``wh_truncated``, ``wh_app``, ``wh_group``,
  ``wh_batch_id``.
* **Not forwarded**: the merge's overflow rows (``message_id`` ``merge:...``): they are partial sums
  set aside by the merge, not messages anyone produced.
* **Exactly once** across replays when deduplication is on for the DLQ topic's namespace: producer
  name ``wh-dlq.<app>.<group>.<origin local name>``, sequence id ``(batch id << 32) + n`` where n
  numbers the batch's forwarded rows of that origin topic in (message id) order, which a replay
  reproduces (:mod:`widehouse.stream.producers`). With deduplication off, a replayed batch forwards
  its rows again (at-least-once; a warning names the topic). Like every sink, the identity is
  (app, group, batch id): a group restarted from a deleted checkpoint needs a new app id.
* **Failure**: a failed publish fails the micro-batch, which Spark replays (sinks idempotent, DLQ
  deduplicated), so no quarantined message is silently left out of its DLQ.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from widehouse.pulsar.topics import TopicName
from widehouse.stream.producers import Outgoing, Producers, sequence_id

if TYPE_CHECKING:
    import pyarrow as pa

DLQ_SUFFIX = "-DLQ"
OVERFLOW_PREFIX = "merge:"
"""Message ids of the merge's overflow rows (partial sums, not messages): never forwarded."""
PAYLOAD_LIMIT = 4096
"""What the stream keeps of a quarantined payload (``TransformPlan.payload_limit``)."""


def dead_letter_topic(topic: str) -> str:
    """``<topic>-DLQ`` in the same namespace (a partition maps to its partitioned topic's DLQ)."""
    base = TopicName.parse(topic).base
    return str(TopicName(base.domain, base.tenant, base.namespace, base.local + DLQ_SUFFIX))


def producer_name(app: str, group: str, topic: str) -> str:
    """The deduplication identity of one group's forwards from ``topic``."""
    return f"wh-dlq.{app}.{group}.{TopicName.parse(topic).base.local}"


@dataclass(frozen=True)
class DeadLetters:
    """One origin topic's forwards of one batch: where, as whom, what."""

    origin: str
    topic: str
    producer: str
    messages: tuple[Outgoing, ...]


def _ms(value: Any) -> int:
    if isinstance(value, dt.datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        return int(moment.timestamp() * 1000)
    return int(value)


def dead_letters(quarantine: pa.Table, app: str, group: str, batch_id: int) -> Iterator[DeadLetters]:
    """The batch's quarantine rows as DLQ messages, per origin topic (rows sorted by message id)."""
    rows: dict[str, list[dict[str, Any]]] = {}
    for row in quarantine.to_pylist():
        if str(row["message_id"]).startswith(OVERFLOW_PREFIX):
            continue
        rows.setdefault(str(TopicName.parse(row["topic"]).base), []).append(row)
    for origin in sorted(rows):
        found = sorted(rows[origin], key=lambda r: str(r["message_id"]))
        messages = []
        for index, row in enumerate(found):
            size = int(row["payload_bytes"])
            payload = bytes(row["payload"] or b"")
            published = _ms(row["publish_time"])
            properties = {
                "wh_reason": str(row["reason"]),
                "wh_detail": str(row["detail"] or ""),
                "wh_origin_topic": str(row["topic"]),
                "wh_message_id": str(row["message_id"]),
                "wh_publish_time": str(published),
                "wh_payload_bytes": str(size),
                "wh_truncated": "true" if size > len(payload) else "false",
                "wh_app": app,
                "wh_group": group,
                "wh_batch_id": str(batch_id),
            }
            messages.append(
                Outgoing(
                    sequence_id(batch_id, index),
                    payload,
                    properties,
                    key=str(row["message_id"]),
                    event_time_ms=published or None,
                )
            )
        yield DeadLetters(
            origin, dead_letter_topic(origin), producer_name(app, group, origin), tuple(messages)
        )


@dataclass
class DeadLetterPublisher:
    """Forwards a group's quarantined messages after each committed batch."""

    producers: Producers
    app: str
    group: str

    def publish(self, quarantine: pa.Table, batch_id: int) -> dict[str, int]:
        """DLQ topic -> messages sent now (0 for a replay the broker already holds)."""
        sent: dict[str, int] = {}
        for letters in dead_letters(quarantine, self.app, self.group, batch_id):
            self.producers.guarantee(letters.topic)
            sent[letters.topic] = self.producers.send(letters.topic, letters.producer, letters.messages)
        return sent

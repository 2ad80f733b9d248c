"""How many messages Pulsar holds for a publish-time range, per topic (admin API only).

Per partition: the broker index (``AppendIndexMetadataInterceptor``, which the source relies on
too) of the first entry published at or after the range's end, minus that of its start. Messages
of one batch entry share the entry's publish time, so entries never straddle a boundary. A topic
that does not exist holds nothing. Retention that already removed part of the range makes the
broker's count smaller than what the stream read: reconciliation reports it.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from widehouse.pulsar.admin import TopicNotFoundError
from widehouse.pulsar.topics import TopicName

if TYPE_CHECKING:
    from widehouse.pulsar.admin import PulsarAdmin


def _ms(value: dt.datetime) -> int:
    return int(value.timestamp() * 1000)


def _index_at(
    admin: PulsarAdmin, partition: TopicName, publish_ms: int, last_index: int, last: tuple[int, int]
) -> int:
    """Broker index of the first message published at or after ``publish_ms`` (last + 1 if none)."""
    position = admin.message_id_at(partition, publish_ms)
    if (position.ledger, position.entry) > last:
        return last_index + 1
    return admin.entry_info(partition, position.ledger, position.entry).first_index


def partition_count_between(
    admin: PulsarAdmin, partition: TopicName, start: dt.datetime, end: dt.datetime
) -> int:
    """Messages of one partition (or non-partitioned topic) published in [start, end)."""
    try:
        last = admin.examine(partition, "latest")
    except TopicNotFoundError:
        return 0
    if last is None:
        return 0
    tail = (last.position.ledger, last.position.entry)
    first = _index_at(admin, partition, _ms(start), last.index, tail)
    after = _index_at(admin, partition, _ms(end), last.index, tail)
    return max(0, after - first)


def messages_between(admin: PulsarAdmin, topic: str | TopicName, start: dt.datetime, end: dt.datetime) -> int:
    """Messages of a topic (all partitions) published in [start, end)."""
    name = topic if isinstance(topic, TopicName) else TopicName.parse(topic)
    partitions = name.partitions(admin.partition_count(name))
    return sum(partition_count_between(admin, p, start, end) for p in partitions)

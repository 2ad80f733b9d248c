"""Executor side: one chunk of a read task's messages, as the read loop collected them.

The read loop (:mod:`widehouse.source.reader`) appends each message's payload and publish time to
plain lists and keeps the client's message object beside them; it does not ask the message for its
id. Taking an id costs more than the payload (``message_id()`` and its three parts: ~1.2 µs of the
~4 µs a message costs to read), and most rows never need it: the stream's transform
(:mod:`widehouse.stream.transform`) needs the id of a quarantined or late message only, the
``pulsar`` format's Arrow rows (:meth:`Messages.to_batch`) of every message.

Message ids are ``ledger:entry:partition:batch`` (the partition of the slice the message was read
from, ``-1`` for a non-partitioned topic; the batch index ``-1`` for a message outside a batch).
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa


def message_key(message: Any) -> tuple[int, int, int]:
    """``(ledger, entry, batch index)`` of a client message: its order inside its topic-partition."""
    mid = message.message_id()
    return (mid.ledger_id(), mid.entry_id(), mid.batch_index())


class Messages:
    """Column lists of the messages read and not yet emitted, in read order.

    ``runs`` says which topic-partition the rows came from: ``(topic, partition, rows)`` per run of
    consecutive rows, in order. The metadata lists (``keys``, ``event``, ``prop_*``) are filled only
    when the read asked for the metadata; otherwise they stay empty.
    """

    def __init__(self) -> None:
        self.values: list[bytes] = []
        self.publish_ms: list[int] = []
        self.messages: list[Any] = []  # the client's messages: ids are taken from them when asked
        self.keys: list[str] = []
        self.event: list[int] = []
        self.prop_offsets: list[int] = [0]
        self.prop_keys: list[str] = []
        self.prop_values: list[str] = []
        self.runs: list[tuple[str, int, int]] = []
        self._run_ends: list[int] | None = None

    def __len__(self) -> int:
        return len(self.values)

    def truncate(self, n: int) -> None:
        """Drop the rows from ``n`` on (messages read past a slice's end); runs are not touched."""
        del self.values[n:], self.publish_ms[n:], self.messages[n:]
        if len(self.prop_offsets) > n + 1:
            del self.keys[n:], self.event[n:], self.prop_offsets[n + 1 :]
            del self.prop_keys[self.prop_offsets[n] :], self.prop_values[self.prop_offsets[n] :]

    def topics(self) -> list[str]:
        """The topic of every row."""
        topics: list[str] = []
        for topic, _partition, rows in self.runs:
            topics += [topic] * rows
        return topics

    def _partition(self, i: int) -> int:
        ends = self._run_ends
        if ends is None or len(ends) != len(self.runs):  # first asked, or runs added since
            ends, total = [], 0
            for _topic, _partition, rows in self.runs:
                total += rows
                ends.append(total)
            self._run_ends = ends
        return self.runs[bisect.bisect_right(ends, i)][1]

    def message_id(self, i: int) -> str:
        """The id of row ``i`` (``ledger:entry:partition:batch``), taken from its message now."""
        ledger, entry, batch = message_key(self.messages[i])
        return f"{ledger}:{entry}:{self._partition(i)}:{batch}"

    def to_batch(self, schema: pa.Schema) -> pa.RecordBatch:
        """The rows as the ``pulsar`` format yields them (:func:`widehouse.source.schema.arrow_schema`),
        every message's id included."""
        import pyarrow as pa
        import pyarrow.compute as pc

        n = len(self.values)
        assert sum(rows for _t, _p, rows in self.runs) == n, "runs must cover every row"
        topics = pa.concat_arrays([pa.array([t] * k, pa.string()) for t, _p, k in self.runs])
        partitions = pa.concat_arrays([pa.array([str(p)] * k, pa.string()) for _t, p, k in self.runs])
        ts_type = schema.field("__publishTime").type
        if len(self.keys) == n:
            keys = pa.array(self.keys, pa.string())
            keys = pc.if_else(pc.equal(keys, ""), pa.scalar(None, pa.string()), keys)
            event_ms = pa.array(self.event, pa.int64())
            event = pc.if_else(
                pc.equal(event_ms, 0), pa.scalar(None, ts_type), pc.multiply(event_ms, 1000).cast(ts_type)
            )
            properties = pa.MapArray.from_arrays(
                pa.array(self.prop_offsets, pa.int32()),
                pa.array(self.prop_keys, pa.string()),
                pa.array(self.prop_values, pa.string()),
                type=schema.field("__properties").type,
            )
        else:  # read without the metadata (ReadConfig.metadata)
            keys = pa.nulls(n, pa.string())
            event = pa.nulls(n, ts_type)
            properties = pa.nulls(n, schema.field("__properties").type)
        ledgers, entries, batches = [], [], []
        for message in self.messages:
            mid = message.message_id()
            ledgers.append(mid.ledger_id())
            entries.append(mid.entry_id())
            batches.append(mid.batch_index())
        message_ids = pc.binary_join_element_wise(
            pa.array(ledgers, pa.int64()).cast(pa.string()),
            pa.array(entries, pa.int64()).cast(pa.string()),
            partitions,
            pa.array(batches, pa.int64()).cast(pa.string()),
            ":",
        )
        publish = pc.multiply(pa.array(self.publish_ms, pa.int64()), 1000).cast(ts_type)
        return pa.RecordBatch.from_arrays(
            [pa.array(self.values, pa.binary()), topics, keys, message_ids, publish, event, properties],
            schema=schema,
        )

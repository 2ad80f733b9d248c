"""The per-micro-batch transform: parse every topic, fold events into partial wide rows, in one pass.

This runs on executors inside the stream's reading tasks, over the read loop's chunks as they are
(:class:`widehouse.source.messages.Messages`: a message's id is taken only for the rows that keep
it, quarantine and late), or over the Pulsar source's Arrow batches (columns ``value``,
``__topic``, ``__messageId``, ``__publishTime``), and yields Arrow batches of one *tagged* schema
(:func:`widehouse.stream.output.output_schema`), so a single pass over the input produces everything
the sinks need:

- ``wh_kind = 'partial'``: one partial wide row per (table, key, hour) with that table's columns
  (prefix ``t<i>_``); counts are 0 and other columns null where nothing contributed;
- ``wh_kind = 'quarantine'``: a message that failed to parse or violated its topic's schema, with
  topic, message id, publish time, the reason and detail, and the payload truncated to a limit;
  also a valid event whose value would take a sum of its partition's partial row out of the sum's
  type (reason ``overflow``: such an event is folded into no column of any table, so no partial
  this function emits is out of range and nothing here raises for any value);
  also a message whose handling raised anything at all (reason ``internal``, detail naming the
  exception's class): each message runs in its own error boundary, folded into every table or none;
- ``wh_kind = 'late'``: a valid event more than the catalog's lateness behind its publish time;
- ``wh_kind = 'stats'``: per topic, publish hour (``wh_publish_time``) and input partition, rows in
  / good / bad / late and the largest event and publish times, for the progress table (summed per
  topic) and the per-hour counts the hourly reconciliation reads (``stream_counts``).

Events are collapsed per (key, hour) *before* they are widened (the expensive part of a union of
narrow topic rows into wide rows): folding uses the catalog's reference semantics
(:mod:`widehouse.catalog.semantics.fold`), so the stream cannot disagree with the generator's manifest.
Partial rows are per hour for every table (a day table's hours are merged again by its sinks).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import pyarrow as pa

from widehouse.catalog.semantics.fold import ColumnRule, WideRows, fold_event
from widehouse.catalog.semantics.parse import INTERNAL, Accepted, parse_event
from widehouse.catalog.semantics.render import render_exception
from widehouse.contracts.periods import HOUR_MS
from widehouse.source.messages import Messages
from widehouse.stream.fastpath import Handler
from widehouse.stream.output import (
    ARROW_VALUE_TYPES,
    SIDE_COLUMNS,
    TIME_COLUMNS,
    TIMESTAMP,
    output_schema,
    value_arrow_type,
)
from widehouse.stream.plan import (
    KIND_LATE,
    KIND_PARTIAL,
    KIND_QUARANTINE,
    KIND_STATS,
    TransformPlan,
    prepared,
)

_RUN_ROWS = 16
"""A read loop's chunk whose runs of one topic average fewer rows than this is folded a row at a
time (as the source's Arrow rows are): the per-run set-up (a slice, the hour's counters, the
handler) costs more than it saves on short runs. A read task's chunks hold a topic-partition's
messages in one run, hundreds of rows or more."""


class _Rows:
    """One input chunk as the fold reads it: payload and publish ms per row, each row's topic (a
    list, or runs of consecutive rows of one topic), and a row's message id and exact publish time
    (epoch µs) on demand: only side rows need them, and taking a Pulsar message's id costs more
    than its payload."""

    __slots__ = ("message_id", "publish_ms", "publish_us", "runs", "topics", "values")

    def __init__(  # noqa: PLR0917 - a chunk's columns, named at its two makers
        self,
        values: Sequence[bytes | None],
        topics: Sequence[str] | None,
        publish_ms: Sequence[int],
        message_id: Callable[[int], str | None],
        publish_us: Callable[[int], int],
        runs: Sequence[tuple[str, int]] | None = None,
    ) -> None:
        if (topics is None) == (runs is None):
            raise ValueError("a chunk's topics come as a list per row or as runs, one of the two")
        self.values = values
        self.topics = topics
        """The topic of every row (the source's Arrow rows), or None: :attr:`runs` says."""
        self.runs = runs
        """(topic, rows) per run of consecutive rows of one topic, in order, covering every row."""
        self.publish_ms = publish_ms
        self.message_id = message_id
        self.publish_us = publish_us

    @classmethod
    def of_messages(cls, chunk: Messages) -> _Rows:
        """The read loop's lists as they are (a run per topic-partition read; a topic per row where
        the runs are short, :data:`_RUN_ROWS`); ids from the chunk's messages when asked."""
        publish_ms = chunk.publish_ms
        publish_us: Callable[[int], int] = lambda i: publish_ms[i] * 1000  # noqa: E731
        if len(chunk.runs) * _RUN_ROWS > len(chunk):
            return cls(chunk.values, chunk.topics(), publish_ms, chunk.message_id, publish_us)
        runs = [(topic, rows) for topic, _partition, rows in chunk.runs]
        return cls(chunk.values, None, publish_ms, chunk.message_id, publish_us, runs)

    @classmethod
    def of_arrow(cls, batch: pa.RecordBatch) -> _Rows:
        """The source's Arrow rows (``value``, ``__topic``, ``__messageId``, ``__publishTime``)."""
        ids = batch.column("__messageId")
        publish_us = _micros(batch.column("__publishTime"))
        return cls(
            batch.column("value").to_pylist(),
            batch.column("__topic").to_pylist(),
            [us // 1000 for us in publish_us],
            lambda i: ids[i].as_py(),
            publish_us.__getitem__,
        )


class _Accumulator:
    """Folds one input partition: partial rows per table, quarantine / late rows, topic stats.

    Times are kept as epoch microseconds (Arrow's unit) until the output arrays are built.
    """

    def __init__(self, plan: TransformPlan) -> None:
        self.plan = plan
        self.catalog = plan.catalog
        self.rows: dict[str, WideRows] = {}
        for name in plan.tables:
            rows = WideRows(plan.catalog.table(name))
            rows.period_ms = HOUR_MS  # partials are per hour whatever the table's grain
            self.rows[name] = rows
        self.rules: dict[str, list[tuple[WideRows, list[ColumnRule]]] | None] = {}
        self.handlers: dict[str, Handler | None] = {}
        self.side: dict[str, list[Any]] = {name: [] for name in SIDE_COLUMNS}
        # (topic, publish hour ms) -> [in, good, bad, late, max_event_ms, max_publish_ms, min_publish_ms]
        self.stats: dict[tuple[str, int], list[int]] = {}

    def _rules(self, topic_name: str) -> list[tuple[WideRows, list[ColumnRule]]] | None:
        if topic_name not in self.rules:
            feeds = prepared(self.plan).topic_rules(topic_name)
            self.rules[topic_name] = None if feeds is None else [(self.rows[name], r) for name, r in feeds]
        return self.rules[topic_name]

    def _handler(self, topic_name: str) -> Handler | None:
        """The topic's compiled fast path bound to this task's tables (None: every event takes the
        reference path)."""
        handler = None
        plans = self._rules(topic_name)
        if self.plan.fast_path and plans is not None:
            template = prepared(self.plan).template(topic_name)
            if template is not None:
                handler = template.bind([rows for rows, _ in plans])
        self.handlers[topic_name] = handler
        return handler

    def add(self, batch: pa.RecordBatch | Messages) -> None:
        """Fold every message of ``batch``: the source's Arrow rows, or the read loop's chunk as it
        is (:class:`~widehouse.source.messages.Messages`)."""
        self._fold(_Rows.of_messages(batch) if isinstance(batch, Messages) else _Rows.of_arrow(batch))

    def _fold(self, rows: _Rows) -> None:
        """Fold every row, a run of one topic at a time where the chunk comes in runs; each row in
        its own error boundary (:meth:`_internal`). A row's message id is asked for only when a side
        row (quarantine, late) is written."""
        if rows.runs is None:
            assert rows.topics is not None
            self._fold_rows(rows, rows.topics)
            return
        covered = sum(count for _topic, count in rows.runs)
        if covered != len(rows.values):
            raise ValueError(f"the chunk's runs cover {covered} rows, not its {len(rows.values)}")
        start = 0
        for topic_name, count in rows.runs:
            self._fold_run(rows, topic_name, start, start + count)
            start += count

    def _fold_rows(self, rows: _Rows, topics: Sequence[str]) -> None:
        """:meth:`_fold` a row at a time: each row's topic and publish hour looked up for it."""
        limit = self.plan.payload_limit
        handlers = self.handlers
        all_stats = self.stats
        for i, (payload, topic_name, publish_ms) in enumerate(
            zip(rows.values, topics, rows.publish_ms, strict=True)
        ):
            slot = (topic_name, publish_ms - publish_ms % HOUR_MS)
            stats = all_stats.get(slot)
            if stats is None:
                stats = all_stats[slot] = [0, 0, 0, 0, 0, 0, publish_ms]
            stats[0] += 1
            if publish_ms > stats[5]:  # noqa: PLR1730 - the hot loop: a branch beats max()
                stats[5] = publish_ms
            if publish_ms < stats[6]:  # noqa: PLR1730
                stats[6] = publish_ms
            # the error boundary, as in _fold_run
            try:
                handler = handlers[topic_name] if topic_name in handlers else self._handler(topic_name)
                if handler is not None and payload:
                    event_ms = handler(payload, publish_ms)
                    if event_ms is not None:
                        stats[1] += 1
                        if event_ms > stats[4]:  # noqa: PLR1730
                            stats[4] = event_ms
                        continue
                self._reference(payload, topic_name, publish_ms, rows, i, stats)
            except Exception as exc:
                self._internal(exc, topic_name, rows, i, payload, limit)
                stats[2] += 1

    def _fold_run(self, rows: _Rows, topic_name: str, start: int, end: int) -> None:
        """Fold rows ``start:end``, all of ``topic_name``: their publish hour's counters once, then
        each row; a run that crosses a publish hour is folded an hour's stretch at a time."""
        if start == end:
            return
        publish = rows.publish_ms[start:end]
        low, high = min(publish), max(publish)
        hour = low - low % HOUR_MS
        if high >= hour + HOUR_MS:
            for a, b in _hour_stretches(publish):
                self._fold_run(rows, topic_name, start + a, start + b)
            return
        stats = self._counted(topic_name, hour, end - start, low, high)
        try:
            handler = self.handlers[topic_name] if topic_name in self.handlers else self._handler(topic_name)
        except Exception as exc:  # compiling failed: each row's boundary quarantines it
            for i in range(start, end):
                self._internal(exc, topic_name, rows, i, rows.values[i], self.plan.payload_limit)
                stats[2] += 1
            return
        good, max_event = 0, stats[4]
        # The error boundary: whatever this message raises is its quarantine reason, never the
        # batch's failure (free in CPython 3.11 while nothing raises). Nothing below changes the
        # partial rows before everything that can fail has passed (the handlers and fold_event
        # check first, then only assign), and each outcome's counter is bumped after its side
        # row is written, so an exception leaves the state as if the message never came.
        for i, (payload, publish_ms) in enumerate(zip(rows.values[start:end], publish, strict=True), start):
            try:
                if handler is not None and payload:
                    event_ms = handler(payload, publish_ms)
                    if event_ms is not None:  # valid, on time, folded into every table
                        good += 1
                        if event_ms > max_event:  # noqa: PLR1730 - the hot loop: a branch beats max()
                            max_event = event_ms
                        continue
                # everything else (and every event with the fast path off) the reference way
                self._reference(payload, topic_name, publish_ms, rows, i, stats)
            except Exception as exc:  # the per-event boundary: quarantine the message, go on
                self._internal(exc, topic_name, rows, i, payload, self.plan.payload_limit)
                stats[2] += 1
        stats[1] += good
        if max_event > stats[4]:  # noqa: PLR1730
            stats[4] = max_event

    def _counted(self, topic_name: str, hour: int, rows: int, low: int, high: int) -> list[int]:
        """The counters of (topic, publish hour) with ``rows`` more rows in, published ``low`` to
        ``high`` ms."""
        stats = self.stats.get((topic_name, hour))
        if stats is None:
            stats = self.stats[(topic_name, hour)] = [0, 0, 0, 0, 0, 0, low]
        stats[0] += rows
        stats[5] = max(stats[5], high)
        stats[6] = min(stats[6], low)
        return stats

    def _reference(  # noqa: PLR0917 - one row and where it sits, named at the one call site
        self, payload: bytes | None, topic_name: str, publish_ms: int, rows: _Rows, i: int, stats: list[int]
    ) -> None:
        """One message (row ``i`` of ``rows``) through the catalog's reference parse and fold (inside
        the caller's boundary: the side row is written before the outcome's counter, so a failure
        never counts twice)."""
        catalog = self.catalog
        limit = self.plan.payload_limit
        body = payload or b""

        def side(kind: str, **fields: Any) -> None:
            self._side(kind, topic_name, rows.message_id(i), rows.publish_us(i), body, limit, **fields)

        plans = self._rules(topic_name)
        if plans is None:
            side(KIND_QUARANTINE, reason="unknown_topic", detail="the topic is not in the catalog")
            stats[2] += 1
            return
        result = parse_event(
            catalog.topic(topic_name), body, publish_ms, catalog.rules, catalog.max_payload_bytes
        )
        if not isinstance(result, Accepted):
            side(KIND_QUARANTINE, reason=result.reason, detail=result.detail[:1000])
            stats[2] += 1
            return
        if result.late:
            side(KIND_LATE, event_us=result.event_ms * 1000, key=str(result.key))
            stats[3] += 1
            stats[4] = max(stats[4], result.event_ms)
            return
        # every table first: an event is folded everywhere or nowhere
        rejected = fold_event(plans, result.key, result.event_ms, result.row, topic=topic_name)
        if rejected is not None:
            side(
                KIND_QUARANTINE,
                reason=rejected.reason,
                detail=rejected.detail[:1000],
                event_us=result.event_ms * 1000,
                key=str(result.key),
            )
            stats[2] += 1
            stats[4] = max(stats[4], result.event_ms)
            return
        stats[1] += 1
        stats[4] = max(stats[4], result.event_ms)

    def _internal(  # noqa: PLR0917 - one row's fields, as _side
        self, exc: Exception, topic: str, rows: _Rows, i: int, payload: Any, limit: int
    ) -> None:
        """Quarantine a message whose handling raised: reason ``internal``, the exception's class and
        a bounded message (rendered so that rendering cannot fail: :func:`render_exception`)."""
        body = payload if isinstance(payload, bytes) else b""
        self._side(
            KIND_QUARANTINE,
            topic,
            rows.message_id(i),
            rows.publish_us(i),
            body,
            limit,
            reason=INTERNAL,
            detail=render_exception(exc),
        )

    def _side(  # noqa: PLR0917 - one row's fields, all named at the call sites
        self,
        kind: str,
        topic: str,
        message_id: str | None,
        publish_us: int,
        body: bytes,
        limit: int,
        reason: str | None = None,
        detail: str | None = None,
        event_us: int | None = None,
        key: str | None = None,
    ) -> None:
        row = {
            "wh_kind": kind,
            "wh_topic": topic,
            "wh_message_id": message_id,
            "wh_publish_time": publish_us,
            "wh_event_time": event_us,
            "wh_key": key,
            "wh_reason": reason,
            "wh_detail": detail,
            "wh_payload": body[:limit],
            "wh_payload_bytes": len(body),
        }
        for name, column in self.side.items():
            column.append(row.get(name))

    def _add_stats_rows(self) -> None:
        for (topic, hour_ms), s in sorted(self.stats.items()):
            row = {
                "wh_kind": KIND_STATS,
                "wh_topic": topic,
                "wh_publish_time": hour_ms * 1000,  # the publish hour these counts cover
                "wh_rows_in": s[0],
                "wh_good": s[1],
                "wh_bad": s[2],
                "wh_late": s[3],
                "wh_max_event_time": s[4] * 1000 if s[4] else None,
                "wh_max_publish_time": s[5] * 1000 if s[5] else None,
                "wh_min_publish_time": s[6] * 1000 if s[6] else None,
            }
            for name, column in self.side.items():
                column.append(row.get(name))

    def batches(self, schema: pa.Schema, max_rows: int = 8192) -> Iterator[pa.RecordBatch]:
        """The partition's output: partial rows per table, then quarantine / late / stats rows."""
        for name in self.plan.tables:
            if self.rows[name].rows:
                yield from self._partials(name, schema).to_batches(max_chunksize=max_rows)
        self._add_stats_rows()
        n = len(self.side["wh_kind"])
        if n:
            arrays = []
            for f in schema:
                if f.name in self.side:
                    arrays.append(_array(self.side[f.name], f.type, f.name in TIME_COLUMNS))
                else:
                    arrays.append(pa.nulls(n, type=f.type))
            yield from pa.Table.from_arrays(arrays, schema=schema).to_batches(max_chunksize=max_rows)

    def _partials(self, name: str, schema: pa.Schema) -> pa.Table:
        rows = self.rows[name]
        table = rows.table
        prefix = self.plan.prefix(name)
        keys = list(rows.rows)
        states = list(rows.rows.values())
        n = len(keys)
        data: dict[str, pa.Array] = {
            "wh_kind": pa.array([KIND_PARTIAL] * n, pa.string()),
            "wh_table": pa.array([name] * n, pa.string()),
            f"{prefix}{table.key_name}": pa.array([k for k, _ in keys], ARROW_VALUE_TYPES[table.key_type]),
            f"{prefix}hour": _array([h * 1000 for _, h in keys], TIMESTAMP, True),
        }
        # one C-level transpose (every state row has a value per column)
        by_column = list(zip(*states, strict=True)) if states else [() for _ in table.columns]
        for i, column in enumerate(table.columns):
            values = by_column[i]
            field_type = value_arrow_type(column.agg, column.value_type)
            is_time = column.value_type == "timestamp-ms"
            if column.is_pair:
                mask = pa.array([v is None for v in values], pa.bool_())
                ts = _array([0 if v is None else v[0] * 1000 for v in values], TIMESTAMP, True)
                inner = [None if v is None else v[1] for v in values]
                vs = _array(
                    [x * 1000 if x is not None and is_time else x for x in inner],
                    ARROW_VALUE_TYPES[column.value_type],
                    is_time,
                )
                data[f"{prefix}{column.name}"] = pa.StructArray.from_arrays(
                    [ts, vs], fields=list(field_type), mask=mask
                )
            elif is_time and column.agg != "count":
                data[f"{prefix}{column.name}"] = _array(
                    [None if v is None else v * 1000 for v in values], TIMESTAMP, True
                )
            else:
                data[f"{prefix}{column.name}"] = pa.array(values, field_type)
        arrays = [data[f.name] if f.name in data else pa.nulls(n, type=f.type) for f in schema]
        return pa.Table.from_arrays(arrays, schema=schema)


def _hour_stretches(publish_ms: Sequence[int]) -> list[tuple[int, int]]:
    """(start, end) of each stretch of consecutive rows published in one hour."""
    stretches: list[tuple[int, int]] = []
    first, hour = 0, publish_ms[0] - publish_ms[0] % HOUR_MS
    for i, ms in enumerate(publish_ms):
        if not hour <= ms < hour + HOUR_MS:
            stretches.append((first, i))
            first, hour = i, ms - ms % HOUR_MS
    stretches.append((first, len(publish_ms)))
    return stretches


def transform(batches: Iterable[pa.RecordBatch | Messages], plan: TransformPlan) -> Iterator[pa.RecordBatch]:
    """Fold every input batch of the partition (the source's Arrow rows or the read loop's chunks),
    then emit the outputs."""
    schema = output_schema(plan)
    acc = _Accumulator(plan)
    for batch in batches:
        acc.add(batch)
    yield from acc.batches(schema)


def compile_handlers(plan: TransformPlan, topics: Iterable[str]) -> int:
    """Compile the fast-path handlers of ``topics`` into this process's cache, ahead of the tasks
    that fold them; returns how many have one. A group whose plan equals ``plan`` (an app of one
    group) finds the templates too: a worker unpickles equal plans as one object (see
    :meth:`widehouse.stream.plan.TransformPlan.__reduce__`). Another group's plan makes its own
    templates (:class:`widehouse.stream.plan.Prepared`, once per worker) but finds their code
    compiled: ~0.6 ms a topic otherwise, paid by the first task that meets the topic (~0.6 s a
    worker with 1,000 topics of as many shapes)."""
    if not plan.fast_path:
        return 0
    acc = _Accumulator(plan)
    return sum(1 for name in topics if plan.catalog.has_topic(name) and acc._handler(name) is not None)


PACKED_SCHEMA = pa.schema([pa.field("wh_ipc", pa.binary())])
"""What :func:`transform_packed` yields: one Arrow IPC stream per output batch, in a binary cell."""
PACKED_COMPRESSION = "lz4"
"""Arrow IPC buffer compression of the packed cells (readers decompress by themselves)."""


def transform_packed(
    batches: Iterable[pa.RecordBatch | Messages], plan: TransformPlan
) -> Iterator[pa.RecordBatch]:
    """:func:`transform`, each output batch shipped as one Arrow IPC stream in one binary cell.

    The tagged output is wide (every table's columns) and sparse (a row fills one table's columns):
    handed to Spark as is, every cell crosses into Spark's rows and back into Arrow for ``toArrow``.
    As one opaque cell per batch it crosses as bytes; :func:`unpack` restores the tagged table.

    The stream's buffers are LZ4-compressed (:data:`PACKED_COMPRESSION`): the sparse layout shrinks
    ~20-25x (a 20,000-event batch of the demo catalog: ~6 MB -> ~0.3 MB), and Spark's JVM copies a
    cell several times on its way to the driver (Python worker -> JVM, row, Arrow writer, task
    result, driver socket), zeroing Arrow buffers of its size each time."""
    options = pa.ipc.IpcWriteOptions(compression=PACKED_COMPRESSION)
    for batch in transform(batches, plan):
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, batch.schema, options=options) as writer:
            writer.write_batch(batch)
        cell = pa.array([sink.getvalue().to_pybytes()], pa.binary())
        yield pa.RecordBatch.from_arrays([cell], schema=PACKED_SCHEMA)


def unpack(packed: pa.Table, plan: TransformPlan) -> pa.Table:
    """The tagged output (:func:`output_schema`) from :func:`transform_packed`'s cells.

    Read on the calling thread: a cell holds a few hundred small compressed buffers, and handing
    them to Arrow's thread pool cost more than it saved (a 20,000-event batch of the demo catalog:
    16.5 -> 6.5 ms of CPU, 9.0 -> 6.2 ms of wall)."""
    schema = output_schema(plan)
    options = pa.ipc.IpcReadOptions(use_threads=False)
    tables = [
        pa.ipc.open_stream(cell.as_buffer(), options=options).read_all() for cell in packed.column("wh_ipc")
    ]
    return pa.concat_tables(tables) if tables else schema.empty_table()


def _micros(column: pa.Array) -> list[int]:
    """Epoch microseconds of a timestamp column as Python ints (0 for nulls)."""
    as_us = column.cast(TIMESTAMP) if column.type != TIMESTAMP else column
    return [0 if v is None else v for v in as_us.cast(pa.int64()).to_pylist()]


def _array(values: list[Any], arrow_type: pa.DataType, micros: bool) -> pa.Array:
    """An Arrow array; time columns arrive as epoch microseconds and are cast, not boxed."""
    if micros:
        return pa.array(values, pa.int64()).cast(arrow_type)
    return pa.array(values, arrow_type)

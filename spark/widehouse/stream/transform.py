"""The per-micro-batch transform: parse every topic, fold events into partial wide rows, in one pass.

This runs on executors inside the stream's reading tasks, over the read loop's chunks as they are
(:class:`widehouse.source.messages.Messages`: a message's id is taken only for the rows that keep
it, quarantine and late), or over the Pulsar source's Arrow batches (columns ``value``,
``__topic``, ``__messageId``, ``__publishTime``), and yields Arrow batches of one *tagged* schema
(:func:`output_schema`), so a single pass over the input produces everything the sinks need:

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

import hashlib
import itertools
import pickle
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from widehouse.catalog import Catalog, WideTable
from widehouse.catalog.semantics.fold import ColumnRule, WideRows, compile_rules, fold_event
from widehouse.catalog.semantics.parse import INTERNAL, Accepted, parse_event
from widehouse.catalog.semantics.render import render_exception
from widehouse.contracts.periods import HOUR_MS
from widehouse.contracts.types import ARROW_OF_SPARK, KIND_TYPES, arrow_type
from widehouse.errors import CatalogError
from widehouse.source.messages import Messages
from widehouse.stream.deadletter import PAYLOAD_LIMIT
from widehouse.stream.fastpath import Handler, HandlerTemplate, handler_template

KIND_PARTIAL = "partial"
KIND_QUARANTINE = "quarantine"
KIND_LATE = "late"
KIND_STATS = "stats"

TIMESTAMP = arrow_type(ARROW_OF_SPARK["timestamp"])
ARROW_VALUE_TYPES: dict[str, pa.DataType] = {k: arrow_type(t.arrow_value) for k, t in KIND_TYPES.items()}

# the columns shared by quarantine, late and stats rows
META_FIELDS: tuple[pa.Field, ...] = (
    pa.field("wh_kind", pa.string(), nullable=False),
    pa.field("wh_table", pa.string()),
    pa.field("wh_topic", pa.string()),
    pa.field("wh_message_id", pa.string()),
    pa.field("wh_publish_time", TIMESTAMP),
    pa.field("wh_event_time", TIMESTAMP),
    pa.field("wh_key", pa.string()),
    pa.field("wh_reason", pa.string()),
    pa.field("wh_detail", pa.string()),
    pa.field("wh_payload", pa.binary()),
    pa.field("wh_payload_bytes", pa.int64()),
    pa.field("wh_rows_in", pa.int64()),
    pa.field("wh_good", pa.int64()),
    pa.field("wh_bad", pa.int64()),
    pa.field("wh_late", pa.int64()),
    pa.field("wh_max_event_time", TIMESTAMP),
    pa.field("wh_min_publish_time", TIMESTAMP),
    pa.field("wh_max_publish_time", TIMESTAMP),
)


@dataclass(frozen=True)
class TransformPlan:
    """Everything the transform needs, picklable (shipped to executors with the function)."""

    catalog: Catalog
    tables: tuple[str, ...]
    """Wide tables to produce partials for, in output order (``t0_``, ``t1_``, ...)."""
    payload_limit: int = PAYLOAD_LIMIT
    """Quarantined payloads are cut to this many bytes (their full size is kept beside them)."""
    fast_path: bool = True
    """Fold valid, on-time events through each topic's compiled handler (:mod:`.fastpath`); False
    sends every event through the reference parse and fold (same output, slower: for comparisons)."""

    def __post_init__(self) -> None:
        for name in self.tables:
            self.catalog.table(name)  # CatalogError naming the table if unknown

    @classmethod
    def for_topics(
        cls, catalog: Catalog, topics: list[str], payload_limit: int = PAYLOAD_LIMIT
    ) -> TransformPlan:
        """The plan for a slot group: every wide table its topics feed."""
        unknown = [t for t in topics if not catalog.has_topic(t)]
        if unknown:
            raise CatalogError(f"topics not in the catalog: {', '.join(sorted(unknown)[:5])}")
        tables = tuple(
            t.name for t in catalog.wide_tables if any(t.name in catalog.topic(n).tables for n in topics)
        )
        return cls(catalog, tables, payload_limit)

    def prefix(self, table: str) -> str:
        return f"t{self.tables.index(table)}_"

    def __reduce__(self) -> tuple[Callable[[bytes, bytes], TransformPlan], tuple[bytes, bytes]]:
        """Pickled as its state's bytes and their digest: :func:`_shipped_plan` builds it once per
        process (see :data:`_SHIPPED`)."""
        state = pickle.dumps((self.catalog, self.tables, self.payload_limit, self.fast_path), protocol=5)
        return _shipped_plan, (hashlib.sha256(state).digest(), state)


_SHIPPED: dict[bytes, TransformPlan] = {}
"""Plans unpickled in this process, by the digest of their pickled state. Spark ships a group's plan
with every reading task (twice: in its reader and in its source class), and a Python worker runs
many of them: building a 1,000-topic catalog's objects again took ~40 ms a task, the same bytes
every time. Keyed by content, so a changed plan is built anew; a task only reads its plan."""
_SHIPPED_MAX = 8


def _shipped_plan(digest: bytes, state: bytes) -> TransformPlan:
    plan = _SHIPPED.get(digest)
    if plan is None:
        catalog, tables, payload_limit, fast_path = pickle.loads(state)  # noqa: S301 (Spark's own task bytes)
        plan = TransformPlan(catalog, tables, payload_limit, fast_path)
        if len(_SHIPPED) >= _SHIPPED_MAX:
            _SHIPPED.clear()
        _SHIPPED[digest] = plan
    return plan


class _Prepared:
    """What every task of one plan derives from the catalog alone, derived once per process: each
    topic's column rules per table and its fast-path handler template. A task binds them to its own
    tables' state (:class:`_Accumulator`); with 1,000 topics this was ~50 µs a topic and task."""

    def __init__(self, plan: TransformPlan) -> None:
        self.plan = plan
        self.rules: dict[str, list[tuple[str, list[ColumnRule]]] | None] = {}
        self.templates: dict[str, HandlerTemplate | None] = {}

    def topic_rules(self, topic_name: str) -> list[tuple[str, list[ColumnRule]]] | None:
        """(table, rules) for each of the plan's tables the topic feeds; None if it is not in the catalog."""
        if topic_name not in self.rules:
            catalog = self.plan.catalog
            found = None
            if catalog.has_topic(topic_name):
                topic = catalog.topic(topic_name)
                found = [
                    (name, compile_rules(topic, catalog.table(name)))
                    for name in topic.tables
                    if name in self.plan.tables
                ]
            self.rules[topic_name] = found
        return self.rules[topic_name]

    def template(self, topic_name: str) -> HandlerTemplate | None:
        """The topic's handler template (None: no fast path); the topic must be in the catalog."""
        if topic_name not in self.templates:
            catalog = self.plan.catalog
            feeds = self.topic_rules(topic_name) or []
            self.templates[topic_name] = handler_template(
                catalog.topic(topic_name),
                [(catalog.table(name), HOUR_MS) for name, _rules in feeds],  # partials are hourly
                catalog.rules,
                catalog.max_payload_bytes,
            )
        return self.templates[topic_name]


_PREPARED: dict[int, _Prepared] = {}
""":class:`_Prepared` by plan (its ``id``; the entry holds the plan, so the id stays its own). A
shipped plan is one object per process (:func:`_shipped_plan`), so every task of a group finds it."""


def _prepared(plan: TransformPlan) -> _Prepared:
    found = _PREPARED.get(id(plan))
    if found is None or found.plan is not plan:
        if len(_PREPARED) >= _SHIPPED_MAX:
            _PREPARED.clear()
        found = _PREPARED[id(plan)] = _Prepared(plan)
    return found


def value_arrow_type(column_agg: str, value_type: str) -> pa.DataType:
    """Arrow type of a partial column (count -> int64; first/last -> struct<ts, v>)."""
    value = ARROW_VALUE_TYPES[value_type]
    if column_agg == "count":
        return pa.int64()
    if column_agg in ("first", "last"):
        return pa.struct([pa.field("ts", TIMESTAMP), pa.field("v", value)])
    return value


def table_fields(plan: TransformPlan, table: WideTable) -> list[pa.Field]:
    prefix = plan.prefix(table.name)
    fields = [
        pa.field(f"{prefix}{table.key_name}", ARROW_VALUE_TYPES[table.key_type]),
        pa.field(f"{prefix}hour", TIMESTAMP),
    ]
    fields += [pa.field(f"{prefix}{c.name}", value_arrow_type(c.agg, c.value_type)) for c in table.columns]
    return fields


def output_schema(plan: TransformPlan) -> pa.Schema:
    fields = list(META_FIELDS)
    for name in plan.tables:
        fields += table_fields(plan, plan.catalog.table(name))
    return pa.schema(fields)


SIDE_COLUMNS: tuple[str, ...] = tuple(f.name for f in META_FIELDS)
_TIME_COLUMNS = frozenset(
    {"wh_publish_time", "wh_event_time", "wh_max_event_time", "wh_min_publish_time", "wh_max_publish_time"}
)


class _Rows:
    """One input chunk as the fold reads it: payload and publish ms per row, the topic of each run
    of consecutive rows, and a row's message id and exact publish time (epoch µs) on demand: only
    side rows need them, and taking a Pulsar message's id costs more than its payload."""

    __slots__ = ("message_id", "publish_ms", "publish_us", "runs", "values")

    def __init__(
        self,
        values: Sequence[bytes | None],
        runs: Sequence[tuple[str, int]],
        publish_ms: Sequence[int],
        message_id: Callable[[int], str | None],
        publish_us: Callable[[int], int],
    ) -> None:
        self.values = values
        self.runs = runs
        """(topic, rows) per run of consecutive rows of one topic, in order, covering every row."""
        self.publish_ms = publish_ms
        self.message_id = message_id
        self.publish_us = publish_us

    @classmethod
    def of_messages(cls, chunk: Messages) -> _Rows:
        """The read loop's lists as they are (its runs are a topic-partition's each); ids from the
        chunk's messages when asked."""
        publish_ms = chunk.publish_ms
        runs = [(topic, rows) for topic, _partition, rows in chunk.runs]
        return cls(chunk.values, runs, publish_ms, chunk.message_id, lambda i: publish_ms[i] * 1000)

    @classmethod
    def of_arrow(cls, batch: pa.RecordBatch) -> _Rows:
        """The source's Arrow rows (``value``, ``__topic``, ``__messageId``, ``__publishTime``)."""
        ids = batch.column("__messageId")
        publish_us = _micros(batch.column("__publishTime"))
        runs = [
            (topic, len(list(group)))
            for topic, group in itertools.groupby(batch.column("__topic").to_pylist())
        ]
        return cls(
            batch.column("value").to_pylist(),
            runs,
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
            feeds = _prepared(self.plan).topic_rules(topic_name)
            self.rules[topic_name] = None if feeds is None else [(self.rows[name], r) for name, r in feeds]
        return self.rules[topic_name]

    def _handler(self, topic_name: str) -> Handler | None:
        """The topic's compiled fast path bound to this task's tables (None: every event takes the
        reference path)."""
        handler = None
        plans = self._rules(topic_name)
        if self.plan.fast_path and plans is not None:
            template = _prepared(self.plan).template(topic_name)
            if template is not None:
                handler = template.bind([rows for rows, _ in plans])
        self.handlers[topic_name] = handler
        return handler

    def add(self, batch: pa.RecordBatch | Messages) -> None:
        """Fold every message of ``batch``: the source's Arrow rows, or the read loop's chunk as it
        is (:class:`~widehouse.source.messages.Messages`)."""
        self._fold(_Rows.of_messages(batch) if isinstance(batch, Messages) else _Rows.of_arrow(batch))

    def _fold(self, rows: _Rows) -> None:
        """Fold every row, a run of one topic at a time; each row in its own error boundary
        (:meth:`_internal`). A row's message id is asked for only when a side row (quarantine, late)
        is written."""
        start = 0
        for topic_name, count in rows.runs:
            self._fold_run(rows, topic_name, start, start + count)
            start += count
        if start != len(rows.values):
            raise ValueError(f"the chunk's runs cover {start} rows, not its {len(rows.values)}")

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
                    arrays.append(_array(self.side[f.name], f.type, f.name in _TIME_COLUMNS))
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
    that fold them; returns how many have one. Each group's plan still makes its own templates
    (:class:`_Prepared`, once per worker) but finds their code compiled: ~0.3 ms a topic otherwise,
    paid by the first task that meets the topic (~0.3 s a worker with 1,000 topics)."""
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

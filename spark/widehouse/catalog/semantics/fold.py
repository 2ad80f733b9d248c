"""Fold: how accepted, on-time events aggregate into wide rows.

The catalog's aggregate semantics in plain Python: the streaming transform folds with it on
executors and the generator's manifest is computed with it, so it is production code, not a test
oracle (tests check it against the hand-written fixture in ``tests/golden/``):

- A row exists for (key, period) as soon as one on-time accepted event of a topic that maps into
  the table arrives for that key and period, whether or not its filters let it into any column.
- ``count`` counts events whose filter is true (0 when none). ``sum``/``min``/``max`` ignore null
  source values and are null when no value arrived. ``first``/``last`` keep the value of the
  smallest/largest (event time, value) pair among non-null values: ties on the event time go to
  the smaller/larger value, exactly like ``min``/``max`` over tuples in ClickHouse and structs in Spark.
- Periods are UTC hours or days (:mod:`widehouse.catalog.eventtime`); values of ``timestamp-ms``
  columns are epoch milliseconds.
- A ``sum`` never leaves its type: an event whose value would take a ``long`` sum outside int64 or a
  ``double`` sum to a non-finite value is not folded at all (none of its columns, in no table); the
  stream quarantines it with reason ``overflow`` (:func:`overflow`), the row keeps the sum without it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from widehouse.catalog.filters import get_path
from widehouse.catalog.model import Catalog, Topic, WideTable
from widehouse.catalog.semantics.parse import OVERFLOW, Rejected
from widehouse.catalog.semantics.render import render_value
from widehouse.catalog.types import INT64
from widehouse.contracts.periods import DAY_MS, HOUR_MS

State = Any  # int for count; number/str/bool for sum/min/max; (event_ms, value) for first/last
Period = int  # epoch ms of the period start


class WideRows:
    """Accumulates column states per (key, period) for one wide table at its grain."""

    def __init__(self, table: WideTable) -> None:
        self.table = table
        self.period_ms = HOUR_MS if table.grain == "hour" else DAY_MS
        self.index = {c.name: i for i, c in enumerate(table.columns)}
        self.empty: list[State] = [0 if c.agg == "count" else None for c in table.columns]
        self.rows: dict[tuple[Any, Period], list[State]] = {}

    def period_of(self, event_ms: int) -> Period:
        return event_ms - event_ms % self.period_ms

    def touch(self, key: Any, event_ms: int) -> list[State]:
        """The state row of (key, period of event_ms), created empty if new."""
        row_key = (key, event_ms - event_ms % self.period_ms)
        row = self.rows.get(row_key)
        if row is None:
            row = self.rows[row_key] = list(self.empty)
        return row

    @staticmethod
    def apply(row: list[State], index: int, agg: str, value: Any, event_ms: int) -> None:
        """Fold one (already filtered) contribution into ``row[index]``. ``value`` is None for count."""
        row[index] = folded(agg, row[index], value, event_ms)

    def merge_state(self, row: list[State], other: list[State]) -> None:
        """Merge another partial state row into ``row`` (how sinks merge partial rows)."""
        for i, column in enumerate(self.table.columns):
            value = other[i]
            if column.agg == "count":
                row[i] += value
            elif value is not None:
                if column.agg in ("first", "last"):
                    self.apply(row, i, column.agg, value[1], value[0])
                else:
                    self.apply(row, i, column.agg, value, 0)

    def final(self) -> dict[tuple[Any, Period], dict[str, Any]]:
        """Final values per (key, period start ms): pairs unwrapped to their value."""
        pairs = [c.is_pair for c in self.table.columns]
        names = [c.name for c in self.table.columns]
        result: dict[tuple[Any, Period], dict[str, Any]] = {}
        for row_key in sorted(self.rows, key=lambda k: (str(k[0]), k[1])):
            state = self.rows[row_key]
            result[row_key] = {
                name: (value[1] if value is not None else None) if pair else value
                for name, pair, value in zip(names, pairs, state, strict=True)
            }
        return result


def folded(agg: str, current: State, value: Any, event_ms: int) -> State:  # noqa: PLR0911 - per agg
    """The state of a column after one (already filtered) contribution: pure, changes nothing.
    ``value`` is None for count; a null value leaves any other aggregate as it was."""
    if agg == "count":
        return current + 1
    if value is None:
        return current
    if agg == "sum":
        return value if current is None else current + value
    if agg == "min":
        return value if current is None or value < current else current
    if agg == "max":
        return value if current is None or value > current else current
    pair = (event_ms, value)
    if agg == "first":
        return pair if current is None or pair < current else current
    if agg == "last":
        return pair if current is None or pair > current else current
    raise ValueError(f"unknown aggregate {agg!r}")


@dataclass(frozen=True)
class ColumnRule:
    """One compiled mapping: the column index, its aggregate, how to read the value, the filter."""

    index: int
    agg: str
    value: Callable[[Mapping[str, Any]], Any] | None
    passes: Callable[[Mapping[str, Any]], bool] | None
    reads: frozenset[str]
    """Top-level fields the value and filter read (to know what depends on key / event time)."""


def compile_rules(topic: Topic, table: WideTable) -> list[ColumnRule]:
    """The mappings of ``topic`` into ``table`` as fast callables, in mapping order."""
    index = {c.name: i for i, c in enumerate(table.columns)}
    rules = []
    for mapping in topic.mappings_for(table.name):
        reads: set[str] = set()
        getter: Callable[[Mapping[str, Any]], Any] | None = None
        if mapping.field is not None:
            path = mapping.field
            reads.add(path[0])
            getter = (
                (lambda row, p=path[0]: row.get(p))
                if len(path) == 1
                else (lambda row, p=path: get_path(row, p))
            )
        passes = None
        if mapping.filter is not None:
            passes = mapping.filter.predicate()
            reads.update(p[0] for p in mapping.filter.fields)
        rules.append(ColumnRule(index[mapping.column], mapping.agg, getter, passes, frozenset(reads)))
    return rules


def sum_in_range(total: Any) -> bool:
    """True if a sum fits its column: a finite double, or an integer within int64."""
    if isinstance(total, float):
        return math.isfinite(total)
    return bool(INT64[0] <= total <= INT64[1])


def overflow(
    rows: WideRows, rules: list[ColumnRule], key: Any, event_ms: int, row: Mapping[str, Any], *, topic: str
) -> Rejected | None:
    """The ``overflow`` rejection if folding the event would take a ``sum`` column of ``rows`` out of
    its type's range (or the value alone is out of it), else None. Changes nothing: check every table an
    event feeds before :func:`contribute` to any, so an event is folded everywhere or nowhere."""
    state = rows.rows.get((key, event_ms - event_ms % rows.period_ms))
    pending: dict[int, Any] = {}
    for rule in rules:
        if rule.agg != "sum" or rule.value is None or (rule.passes is not None and not rule.passes(row)):
            continue
        value = rule.value(row)
        if value is None:
            continue
        current = pending[rule.index] if rule.index in pending else (state[rule.index] if state else None)
        total = value if current is None else current + value
        if not sum_in_range(total):
            column = rows.table.columns[rule.index]
            return Rejected(
                OVERFLOW,
                f"{topic}: {rows.table.name}.{column.name} sum {current!r} + value {value!r} "
                f"= {total!r} is outside the {column.value_type} range; the event is not folded",
            )
        pending[rule.index] = total
    return None


def contribute(
    rows: WideRows, rules: list[ColumnRule], key: Any, event_ms: int, row: Mapping[str, Any]
) -> None:
    """Fold one accepted, on-time event (its parsed ``row``) into ``rows``."""
    state = rows.touch(key, event_ms)
    for rule in rules:
        if rule.passes is not None and not rule.passes(row):
            continue
        WideRows.apply(state, rule.index, rule.agg, rule.value(row) if rule.value else None, event_ms)


def fold_event(
    plans: list[tuple[WideRows, list[ColumnRule]]],
    key: Any,
    event_ms: int,
    row: Mapping[str, Any],
    *,
    topic: str,
) -> Rejected | None:
    """:func:`overflow` over every table of ``plans``, then :func:`contribute` to each, in one pass:
    each filter and value is evaluated once. Returns the ``overflow`` rejection (and folds nothing)
    if any ``sum`` would leave its type, else None (the event is folded into every table).

    Atomic whatever raises: every filter, value, comparison and sum of every table is computed first
    (into new column states); only then are they stored, which cannot fail. An exception (a bug, a
    value nobody foresaw) therefore leaves every table as if the event never came."""
    folds: list[tuple[WideRows, dict[int, State]]] = []
    for rows, rules in plans:
        state = rows.rows.get((key, event_ms - event_ms % rows.period_ms))
        current = state if state is not None else rows.empty
        pending: dict[int, State] = {}  # column index -> its state with this event
        for rule in rules:
            if rule.passes is not None and not rule.passes(row):
                continue
            value = rule.value(row) if rule.value is not None else None
            index = rule.index
            before = pending[index] if index in pending else current[index]
            after = folded(rule.agg, before, value, event_ms)
            if rule.agg == "sum" and value is not None and not sum_in_range(after):
                column = rows.table.columns[index]
                return Rejected(
                    OVERFLOW,
                    f"{topic}: {rows.table.name}.{column.name} sum {render_value(before)} + value "
                    f"{render_value(value)} = {render_value(after)} is outside the {column.value_type} "
                    "range; the event is not folded",
                )
            pending[index] = after
        folds.append((rows, pending))
    for rows, pending in folds:  # nothing below can raise: the event lands in every table
        state = rows.touch(key, event_ms)
        for index, after in pending.items():
            state[index] = after
    return None


def aggregate(
    catalog: Catalog, events: Iterable[tuple[Topic, int | str, int, Mapping[str, Any]]]
) -> dict[str, dict[tuple[Any, Period], dict[str, Any]]]:
    """Final wide rows per table from (topic, key, event_ms, parsed row) of accepted on-time events
    (events that would overflow a sum are left out, as the stream quarantines them)."""
    tables = {t.name: WideRows(t) for t in catalog.wide_tables}
    compiled: dict[str, list[tuple[WideRows, list[ColumnRule]]]] = {}
    for topic, key, event_ms, row in events:
        plans = compiled.get(topic.origin)
        if plans is None:
            plans = compiled[topic.origin] = [
                (tables[name], compile_rules(topic, tables[name].table)) for name in topic.tables
            ]
        if any(overflow(rows, rules, key, event_ms, row, topic=str(topic.name)) for rows, rules in plans):
            continue
        for rows, rules in plans:
            contribute(rows, rules, key, event_ms, row)
    return {name: rows.final() for name, rows in tables.items()}

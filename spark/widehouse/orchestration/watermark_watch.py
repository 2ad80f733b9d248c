"""Which hours of a table are final, from watermark events (pure: no Airflow, no Pulsar, no Spark).

The event trigger (:mod:`widehouse.orchestration.pulsar_trigger`) feeds every event of the control
topic into an :class:`HourWatch` and asks it, after each read, which hours became final. The rule is
the finalize gate's (:mod:`widehouse.batch.gate`): hour H is final once every group feeding the table
has a watermark at or past ``needed_watermark(H)`` = H + 1 h + lateness. The feeding groups are the
plan's (``feeding_groups``); with no plan, the groups whose events name one of the table's topics.
Hours are handed out in order from the next unfinalized hour, never one whose gate is closed.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from widehouse.batch.gate import Gate, needed_watermark
from widehouse.catalog import Catalog
from widehouse.contracts.periods import HOUR, as_hour, floor_hour, parse_hour
from widehouse.stream.control import WatermarkEvent


def first_unfinalized(
    start: dt.datetime, published: Iterable[dt.datetime], until: dt.datetime
) -> dt.datetime:
    """The first hour from ``start`` not in ``published`` (``until`` + 1 h when all up to it are)."""
    done = {as_hour(h) for h in published}
    hour = as_hour(start)
    last = floor_hour(until)
    while hour <= last and hour in done:
        hour += HOUR
    return hour


@dataclass
class HourWatch:
    """The newest watermark per group of one app, and the next hour of ``table`` to hand out."""

    catalog: Catalog
    table: str
    app: str
    next_hour: dt.datetime
    max_hours: int = 24
    """At most this many hours per firing (a long backlog is handed out in steps)."""
    marks: dict[str, int] = field(default_factory=dict)
    group_topics: dict[str, frozenset[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.catalog.table(self.table)  # a clear error for an unknown table
        self.next_hour = as_hour(self.next_hour)
        self.topics = frozenset(str(t.name) for t in self.catalog.topics_for(self.table))

    def observe(self, event: WatermarkEvent) -> None:
        """Keep the highest watermark per group (events of other apps are ignored; replays too)."""
        if event.app != self.app:
            return
        self.marks[event.group] = max(self.marks.get(event.group, event.watermark_ms), event.watermark_ms)
        self.group_topics[event.group] = frozenset(event.topics)

    def feeding(self, plan_groups: list[str] | None) -> list[str]:
        if plan_groups is not None:
            return sorted(plan_groups)
        return sorted(g for g, topics in self.group_topics.items() if topics & self.topics)

    def gate(self, hour: dt.datetime, plan_groups: list[str] | None) -> Gate:
        """The finalize gate of ``hour`` as the events know it."""
        marks = {
            g: dt.datetime.fromtimestamp(self.marks[g] / 1000, dt.UTC) if g in self.marks else None
            for g in self.feeding(plan_groups)
        }
        return Gate(self.table, as_hour(hour), needed_watermark(self.catalog, hour), marks)

    def ready_hours(self, plan_groups: list[str] | None) -> list[dt.datetime]:
        """Hours from :attr:`next_hour` on whose gate is open, in order (empty: not yet)."""
        hours: list[dt.datetime] = []
        hour = self.next_hour
        while len(hours) < self.max_hours and self.gate(hour, plan_groups).ready:
            hours.append(hour)
            hour += HOUR
        return hours

    def advance(self, hours: list[dt.datetime]) -> None:
        if hours:
            self.next_hour = max(hours) + HOUR

    def payload(self, hours: list[dt.datetime], plan_groups: list[str] | None) -> dict[str, Any]:
        """The trigger event's payload (JSON): the hours, and the gate of the last one."""
        gate = self.gate(hours[-1], plan_groups)
        return {
            "table": self.table,
            "app": self.app,
            "hours": [h.isoformat() for h in hours],
            "needed": gate.needed.isoformat(),
            "watermarks": {g: w.isoformat() if w else None for g, w in gate.groups.items()},
        }


def hours_in_events(table: str, extras: Iterable[Mapping[str, Any] | None]) -> list[dt.datetime]:
    """The hours of ``table`` named by triggering Asset events (extra ``{"payload": {...}}`` as the
    triggerer stores a trigger's payload), sorted and without repeats."""
    hours: set[dt.datetime] = set()
    for extra in extras:
        payload = (extra or {}).get("payload") or {}
        if not isinstance(payload, Mapping) or payload.get("table") != table:
            continue
        for text in payload.get("hours") or []:
            hours.add(parse_hour(str(text), f"{table}'s event hour"))
    return sorted(hours)

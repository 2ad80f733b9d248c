"""Generate realistic, labelled event traffic from the catalog and account for it in a manifest.

:class:`TrafficGenerator` produces messages in chunks (pure Python + numpy, no Pulsar) and folds every
message into the manifest as it is made: counts per topic and label, and the expected wide rows of
the accepted, on-time events. :func:`widehouse.generator.generate` publishes the chunks.

Speed comes from pre-serialization: each topic has ``variants`` bodies drawn once (JSON bytes and
their typed values); a message is ``head + key + mid + event time + body`` and its contribution to
the wide rows is precomputed per variant (filters evaluated once), except for mappings that read the
key or the event time, which are evaluated per message.

Event times: a message is due ``offset`` ms after the base time (see
:mod:`widehouse.generator.schedule`); a good event happened up to ``max_delay_ms`` before it was
due (exponential jitter, mean 2 s), a late one 10 minutes to 5 hours beyond the lateness limit.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson

from widehouse.catalog.eventtime import iso_utc
from widehouse.catalog.model import Catalog, Topic
from widehouse.catalog.semantics.fold import ColumnRule, WideRows, compile_rules
from widehouse.catalog.semantics.parse import Accepted, parse_event
from widehouse.contracts.periods import DAY_MS, HOUR_MS
from widehouse.errors import ConfigError
from widehouse.generator.badinput import (
    BAD_CLASSES,
    LABELS,
    LATE,
    OK,
    POLICY,
    REASONS,
    UNKNOWN_FIELDS,
    make_bad,
    unknown_fields,
)
from widehouse.generator.manifest import FORMAT, Manifest, period_rows
from widehouse.generator.options import FIRST_UID, GenerateOptions
from widehouse.generator.schedule import Timeline, topic_weights, zipf_cdf
from widehouse.generator.values import object_value, seeded

LATE_MIN_EXTRA_MS = 10 * 60_000
LATE_MAX_EXTRA_MS = 5 * HOUR_MS
JITTER_MEAN_MS = 2_000.0


@dataclass
class Chunk:
    """Consecutive messages: parallel lists, plus each message's due offset (ms after the start)."""

    start: int
    topics: list[int]
    keys: list[str]
    payloads: list[bytes]
    labels: list[str | None]
    """None for a good, on-time event; the label otherwise (message property ``wh_label``)."""
    offsets_ms: list[int]

    def __len__(self) -> int:
        return len(self.payloads)


@dataclass
class _TableSlot:
    rows: WideRows
    counts: list[list[int]]  # per variant: indexes of count columns whose filter passes
    others: list[list[tuple[int, str, Any]]]  # per variant: (index, agg, value) for static non-count rules
    dynamic: list[ColumnRule]  # rules reading the key or the event time


@dataclass
class _TopicPlan:
    index: int
    topic: Topic
    head: bytes
    mid: bytes
    tails: list[bytes]
    raw: list[dict[str, Any]]
    typed: list[dict[str, Any]]
    slots: list[_TableSlot]
    counters: dict[str, int] = field(default_factory=lambda: dict.fromkeys(LABELS, 0))


class TrafficGenerator:
    """Deterministic traffic for (catalog, options, base time): chunks of messages plus the manifest."""

    def __init__(self, catalog: Catalog, options: GenerateOptions, base_ms: int | None = None) -> None:
        self.catalog = catalog
        self.options = options.validate()
        # precedence: the explicit argument, then the option, then now
        if base_ms is None:
            base_ms = options.base_time_ms if options.base_time_ms is not None else int(time.time() * 1000)
        self.base_ms = base_ms
        self.topics = select_topics(catalog, options.topics)
        self.timeline = Timeline(options)
        self.total = (
            options.count if options.count is not None else self.timeline.count_for(options.duration_s or 0)
        )
        self.tables = {t.name: WideRows(t) for t in catalog.wide_tables}
        self.plans = [self._plan(i, t) for i, t in enumerate(self.topics)]
        self._topic_cdf = np.cumsum(topic_weights(self.topics, options.topic_skew))
        self._topic_cdf[-1] = 1.0
        self._user_cdf = zipf_cdf(options.users, options.user_skew)
        self._keys: dict[int, tuple[str, bytes]] = {}
        self.key_type = self.topics[0].key_type if self.topics else "long"
        self.generated = 0
        self.hours: set[int] = set()

    # -- planning ------------------------------------------------------------------------------
    def _plan(self, index: int, topic: Topic) -> _TopicPlan:
        rng = seeded(self.options.seed, topic.origin)
        skip = frozenset({topic.key, topic.event_time})
        raw = [object_value(rng, topic.fields, self.base_ms, skip) for _ in range(self.options.variants)]
        bodies = [orjson.dumps(values)[1:-1] for values in raw]
        tails = [(b"," + body if body else b"") + b"}" for body in bodies]
        typed = []
        for values in raw:
            # the typed values exactly as the reference parser reads them (ints in double fields -> float)
            probe = orjson.dumps({topic.key: _probe_key(topic), topic.event_time: self.base_ms, **values})
            parsed = parse_event(
                topic, probe, self.base_ms, self.catalog.rules, self.catalog.max_payload_bytes
            )
            if not isinstance(parsed, Accepted):
                raise ConfigError(
                    f"{topic.file}: generated values do not parse ({parsed.reason}: {parsed.detail})"
                )
            typed.append(parsed.row)
        slots = []
        dependent = {topic.key, topic.event_time}
        for table_name in topic.tables:
            rows = self.tables[table_name]
            rules = compile_rules(topic, rows.table)
            static = [r for r in rules if not (r.reads & dependent)]
            dynamic = [r for r in rules if r.reads & dependent]
            counts: list[list[int]] = []
            others: list[list[tuple[int, str, Any]]] = []
            for row in typed:
                passing = [r for r in static if r.passes is None or r.passes(row)]
                counts.append([r.index for r in passing if r.agg == "count"])
                others.append(
                    [
                        (r.index, r.agg, value)
                        for r in passing
                        if r.agg != "count" and (value := r.value(row) if r.value else None) is not None
                    ]
                )
            slots.append(_TableSlot(rows, counts, others, dynamic))
        head = b'{"' + topic.key.encode() + b'":'
        mid = b',"' + topic.event_time.encode() + b'":'
        return _TopicPlan(index, topic, head, mid, tails, raw, typed, slots)

    def key_of(self, user: int) -> tuple[str, bytes]:
        """(key as text, key as JSON) for a user index."""
        cached = self._keys.get(user)
        if cached is None:
            uid = FIRST_UID + user
            text = str(uid) if self.key_type == "long" else f"u{uid}"
            json_key = text.encode() if self.key_type == "long" else orjson.dumps(text)
            cached = self._keys[user] = (text, json_key)
        return cached

    # -- generation ----------------------------------------------------------------------------
    def chunks(self) -> Iterator[Chunk]:
        """All messages, in chunks of ``options.chunk_size``; each is accounted when produced."""
        rng = np.random.Generator(np.random.PCG64(self.options.seed))
        size = self.options.chunk_size
        for start in range(0, self.total, size):
            yield self._chunk(rng, start, min(size, self.total - start))

    def _chunk(self, rng: np.random.Generator, start: int, n: int) -> Chunk:  # noqa: PLR0912, PLR0915 - the hot loop stays inline
        options, rules = self.options, self.catalog.rules
        offsets = self.timeline.offsets_ms(np.arange(start, start + n, dtype=np.int64)).tolist()
        topic_idx = np.searchsorted(self._topic_cdf, rng.random(n), side="right").tolist()
        user_idx = np.searchsorted(self._user_cdf, rng.random(n), side="right").tolist()
        variant_idx = rng.integers(0, options.variants, n).tolist()
        draw = rng.random(n).tolist()
        delay = np.minimum(rng.exponential(JITTER_MEAN_MS, n), options.max_delay_ms).astype(np.int64).tolist()
        lag = rng.integers(
            rules.lateness_ms + LATE_MIN_EXTRA_MS, rules.lateness_ms + LATE_MAX_EXTRA_MS, n
        ).tolist()
        bad_pick = rng.integers(0, max(1, len(options.bad_classes)), n).tolist()
        subseed = rng.integers(0, 2**62, n).tolist()

        bad_rate, late_limit = options.bad_rate, options.bad_rate + options.late_rate
        base, plans, key_of, apply = self.base_ms, self.plans, self.key_of, WideRows.apply
        keys: list[str] = [""] * n
        payloads: list[bytes] = [b""] * n
        labels: list[str | None] = [None] * n
        hours = self.hours
        for j in range(n):
            plan = plans[topic_idx[j]]
            key_text, key_json = key_of(user_idx[j])
            keys[j] = key_text
            planned = base + offsets[j]
            variant = variant_idx[j]
            r = draw[j]
            if r >= late_limit or (r < bad_rate and options.bad_classes[bad_pick[j]] == UNKNOWN_FIELDS):
                event_ms = planned - delay[j]
                payload = plan.head + key_json + plan.mid + str(event_ms).encode() + plan.tails[variant]
                if r >= late_limit:
                    plan.counters[OK] += 1
                else:
                    extra = orjson.dumps(unknown_fields(plan.topic, seeded(subseed[j])))
                    payload = payload[:-1] + b"," + extra[1:-1] + b"}"
                    plan.counters[UNKNOWN_FIELDS] += 1
                    labels[j] = UNKNOWN_FIELDS
                payloads[j] = payload
                hours.add(event_ms - event_ms % HOUR_MS)
                key = int(key_text) if self.key_type == "long" else key_text
                for slot in plan.slots:
                    table_rows = slot.rows
                    row_key = (key, event_ms - event_ms % table_rows.period_ms)
                    state = table_rows.rows.get(row_key)
                    if state is None:
                        state = table_rows.touch(key, event_ms)
                    for index in slot.counts[variant]:
                        state[index] += 1
                    for index, agg, value in slot.others[variant]:
                        apply(state, index, agg, value, event_ms)
                    if slot.dynamic:
                        row = dict(plan.typed[variant])
                        row[plan.topic.key] = key
                        row[plan.topic.event_time] = event_ms
                        for rule in slot.dynamic:
                            if rule.passes is None or rule.passes(row):
                                apply(
                                    state,
                                    rule.index,
                                    rule.agg,
                                    rule.value(row) if rule.value else None,
                                    event_ms,
                                )
            elif r >= bad_rate:
                event_ms = planned - lag[j]
                payloads[j] = plan.head + key_json + plan.mid + str(event_ms).encode() + plan.tails[variant]
                labels[j] = LATE
                plan.counters[LATE] += 1
            else:
                label = options.bad_classes[bad_pick[j]]
                event_ms = planned - delay[j]
                good = plan.head + key_json + plan.mid + str(event_ms).encode() + plan.tails[variant]
                key_value: Any = int(key_text) if self.key_type == "long" else key_text
                payloads[j] = make_bad(
                    label,
                    plan.topic,
                    seeded(subseed[j]),
                    key=key_value,
                    planned_ms=planned,
                    event_ms=event_ms,
                    values=plan.raw[variant],
                    good_payload=good,
                    max_payload_bytes=self.catalog.max_payload_bytes,
                    max_age_ms=rules.max_age_ms,
                )
                labels[j] = label
                plan.counters[label] += 1
        self.generated += n
        return Chunk(start, topic_idx, keys, payloads, labels, offsets)

    # -- manifest ------------------------------------------------------------------------------
    def manifest(self, run: dict[str, Any] | None = None) -> Manifest:
        """The manifest of everything generated so far (call after consuming :meth:`chunks`)."""
        options, rules = self.options, self.catalog.rules
        topics: dict[str, Any] = {}
        totals = _counts_node(dict.fromkeys(LABELS, 0))
        for plan in self.plans:
            node = _counts_node(plan.counters)
            if node["sent"]:
                topics[plan.topic.origin] = node
            for label, count in plan.counters.items():
                totals["by_label"][label] += count
        totals = _counts_node(totals["by_label"])
        expected = {}
        for name, rows in self.tables.items():
            table = rows.table
            counts = {c.name for c in table.columns if c.agg == "count"}
            expected[name] = {
                "grain": table.grain,
                "key": table.key_name,
                "columns": [c.name for c in table.columns],
                "count_columns": sorted(counts),
                "rows": period_rows(rows.final(), counts),
            }
        days = sorted({h - h % DAY_MS for h in self.hours})
        data = {
            "format": FORMAT,
            "catalog": {"name": self.catalog.name, "fingerprint": self.catalog.fingerprint},
            "options": {
                "seed": options.seed,
                "count": self.total,
                "rate": options.rate,
                "duration_s": options.duration_s,
                "base_time_ms": self.base_ms,
                "base_time": iso_utc(self.base_ms),
                "users": options.users,
                "first_key": FIRST_UID,
                "user_skew": options.user_skew,
                "topic_skew": options.topic_skew,
                "topics": options.topics,
                "bad_rate": options.bad_rate,
                "bad_classes": list(options.bad_classes),
                "late_rate": options.late_rate,
                "burst_factor": options.burst_factor,
                "burst_every_s": options.burst_every_s,
                "burst_length_s": options.burst_length_s,
                "variants": options.variants,
                "max_delay_ms": options.max_delay_ms,
            },
            "rules": {
                "lateness_ms": rules.lateness_ms,
                "max_future_ms": rules.max_future_ms,
                "max_age_ms": rules.max_age_ms,
                "max_payload_bytes": self.catalog.max_payload_bytes,
            },
            "policy": dict(POLICY),
            "reasons": dict(REASONS),
            "totals": totals,
            "topics": topics,
            "periods": {
                "hours": [iso_utc(h) for h in sorted(self.hours)],
                "days": [iso_utc(d)[:10] for d in days],
            },
            "expected": expected,
        }
        if run is not None:
            data["run"] = run
        return Manifest(data)


def _counts_node(counters: dict[str, int]) -> dict[str, Any]:
    by_label = {label: int(counters.get(label, 0)) for label in LABELS}
    by_reason: dict[str, int] = {}
    for label, count in by_label.items():
        if count and label in REASONS:
            by_reason[REASONS[label]] = by_reason.get(REASONS[label], 0) + count
    return {
        "sent": sum(by_label.values()),
        "wide": sum(c for label, c in by_label.items() if POLICY[label] == "accept"),
        "late": sum(c for label, c in by_label.items() if POLICY[label] == "late"),
        "quarantined": sum(c for label, c in by_label.items() if POLICY[label] == "quarantine"),
        "by_label": by_label,
        "by_reason": by_reason,
    }


def _probe_key(topic: Topic) -> int | str:
    return FIRST_UID if topic.key_type == "long" else f"u{FIRST_UID}"


def select_topics(catalog: Catalog, pattern: str | None) -> list[Topic]:
    """The catalog topics that get traffic (``pattern`` searched in catalog names), sorted by name."""
    topics = list(catalog.topics)
    if pattern is not None:
        regex = re.compile(pattern)
        topics = [t for t in topics if regex.search(t.origin) or regex.search(str(t.name))]
    if not topics:
        raise ConfigError(f"--topics {pattern!r} matches no topic of the catalog at {catalog.root}")
    key_types = {t.key_type for t in topics}
    if len(key_types) > 1:
        raise ConfigError(
            f"the selected topics mix key types {sorted(key_types)}; select topics of one key type"
        )
    return topics


__all__ = ["BAD_CLASSES", "Chunk", "TrafficGenerator", "select_topics"]

"""The golden fixture: hand-written messages (events.yaml) and their hand-computed results (expected.yaml).

Nothing in this module computes an expected value: expected rows come verbatim from expected.yaml,
only completed with the documented defaults (a count not listed is 0, any other column null).
The project's code appears only on the *actual* side (the transform's output, read back with
:mod:`widehouse.stream.merge`).

Reusable beyond the unit test:

- :func:`load_messages` -> :class:`Message` (topic, key, payload bytes, publish and event time in epoch
  ms, whether its verdict depends on the publish time), :func:`for_publishing` -> plain tuples for a
  Pulsar producer;
- :func:`to_batch` -> the Arrow batch shape the Pulsar source hands the transform;
- :func:`load_expected` -> :class:`Expected` (rows, quarantine reasons, late ids, per-topic counts);
  :func:`complete_rows` fills in the unlisted columns;
- :func:`actual` -> the same views of the transform's tagged output.

``shift_days`` moves every fixture time (publish and event times, hours, days, timestamp values) by
whole days, e.g. to put the fixture near "now" for services that judge times against the clock.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import yaml

from widehouse.source.schema import arrow_schema

GOLDEN_DIR = Path(__file__).resolve().parent
EVENTS_FILE = GOLDEN_DIR / "events.yaml"
EXPECTED_FILE = GOLDEN_DIR / "expected.yaml"

DAY_MS = 86_400_000
TIMESTAMP = pa.timestamp("us", tz="UTC")
# the Pulsar source's columns as the source emits them, without __properties (the transform never
# reads them): the input's shape, not an expected value
SOURCE_SCHEMA = arrow_schema().remove(arrow_schema().get_field_index("__properties"))
_ISO_MS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")

RowKey = tuple[str, Any, str]
"""(wide table, key, period): period is ``2026-11-22T09:00:00Z`` for hour tables, ``2026-11-22`` for day."""


# ------------------------------------------------------------------------------------------- times
def to_ms(value: str | datetime) -> int:
    """Epoch ms of an ISO UTC time (``2026-11-22T09:05:00.000Z``) or an aware datetime."""
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    if moment.tzinfo is None:
        raise ValueError(f"{value!r}: times in the golden fixture must be UTC (end with Z)")
    delta = moment - datetime(1970, 1, 1, tzinfo=UTC)
    return delta.days * DAY_MS + delta.seconds * 1000 + delta.microseconds // 1000


def iso_ms(value: int | datetime) -> str:
    """``2026-11-22T09:05:00.000Z`` for epoch ms or a datetime."""
    moment = (
        value.astimezone(UTC)
        if isinstance(value, datetime)
        else datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=value)
    )
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def hour_text(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def day_text(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d")


def _shift_text(text: str, days: int) -> str:
    """Shift an ISO time / hour / day string by whole days, keeping its format."""
    if not days:
        return text
    if _ISO_MS.match(text):
        return iso_ms(to_ms(text) + days * DAY_MS)
    if len(text) == 10:
        return (datetime.fromisoformat(text) + timedelta(days=days)).strftime("%Y-%m-%d")
    return hour_text(datetime.fromisoformat(text) + timedelta(days=days))


# ---------------------------------------------------------------------------------------- messages
@dataclass(frozen=True)
class Message:
    message_id: str
    topic: str
    key: str | None
    """The Pulsar message key (the transform keys rows by the payload's key field, not this)."""
    payload: bytes
    publish_ms: int
    event_ms: int | None
    """The event time the fixture wrote into the payload, or None when the payload carries its own."""
    note: str
    publish_relative: bool = False
    """Late or absurd only relative to the fixture's publish time, which a real broker does not keep
    (it stamps its own): tests that publish to Pulsar leave these out."""


def _payload(entry: dict[str, Any], event_field: str | None, event_ms: int | None) -> bytes:
    forms = [name for name in ("payload", "raw", "raw_latin1", "raw_hex") if name in entry]
    if len(forms) != 1:
        raise ValueError(f"{entry['message_id']}: exactly one of payload/raw/raw_latin1/raw_hex, got {forms}")
    if "raw" in entry:
        return str(entry["raw"]).encode("utf-8")
    if "raw_latin1" in entry:
        return str(entry["raw_latin1"]).encode("latin-1")
    if "raw_hex" in entry:
        return bytes.fromhex(str(entry["raw_hex"]).replace(" ", ""))
    document = dict(entry["payload"])
    if event_ms is not None:
        if event_field is None:
            raise ValueError(f"{entry['message_id']}: event_time given for a topic without an event field")
        if event_field in document:
            raise ValueError(f"{entry['message_id']}: event_time given and {event_field} set in the payload")
        document[event_field] = event_ms
    if "pad_bytes" in entry:
        document["padding"] = "x" * int(entry["pad_bytes"])
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def load_fixture(path: Path = EVENTS_FILE) -> dict[str, Any]:
    """events.yaml as written (``day``, ``topics``: key / event-time field per topic, ``messages``)."""
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def load_messages(path: Path = EVENTS_FILE, shift_days: int = 0) -> list[Message]:
    """The fixture's messages in file order, payloads serialised (compact JSON, UTF-8)."""
    fixture = load_fixture(path)
    fields = fixture["topics"]
    shift = shift_days * DAY_MS
    messages = []
    for entry in fixture["messages"]:
        topic = entry["topic"]
        event_ms = to_ms(entry["event_time"]) + shift if entry.get("event_time") is not None else None
        event_field = fields[topic]["event_time"] if topic in fields else None
        publish_relative = entry.get("publish_relative", False)
        if not isinstance(publish_relative, bool):
            raise ValueError(f"{entry['message_id']}: publish_relative must be true or false")
        messages.append(
            Message(
                message_id=str(entry["message_id"]),
                topic=topic,
                key=None if entry.get("key") is None else str(entry["key"]),
                payload=_payload(entry, event_field, event_ms),
                publish_ms=to_ms(entry["publish_time"]) + shift,
                event_ms=event_ms,
                note=str(entry.get("note", "")),
                publish_relative=publish_relative,
            )
        )
    ids = [m.message_id for m in messages]
    if len(set(ids)) != len(ids):
        raise ValueError("duplicate message ids in the golden fixture")
    return messages


def for_publishing(messages: Iterable[Message]) -> list[tuple[str, str | None, bytes, int, int | None]]:
    """(topic, key, payload, publish ms, event ms) per message, for a producer."""
    return [(m.topic, m.key, m.payload, m.publish_ms, m.event_ms) for m in messages]


def to_batch(messages: Iterable[Message]) -> pa.RecordBatch:
    """The messages as one Arrow batch of the Pulsar source's shape (publish times in microseconds)."""
    messages = list(messages)
    return pa.RecordBatch.from_pydict(
        {
            "value": [m.payload for m in messages],
            "__topic": [m.topic for m in messages],
            "__key": [m.key for m in messages],
            "__messageId": [m.message_id for m in messages],
            "__publishTime": pa.array([m.publish_ms * 1000 for m in messages], pa.int64()).cast(TIMESTAMP),
            "__eventTime": pa.nulls(len(messages), TIMESTAMP),
        },
        schema=SOURCE_SCHEMA,
    )


# ---------------------------------------------------------------------------------------- expected
@dataclass(frozen=True)
class Outcome:
    """What the stream writes for the golden input: what it must write (:data:`Expected`) or what it
    wrote (:data:`Actual`), compared field by field."""

    rows: dict[RowKey, dict[str, Any]]
    """Expected: listed column values only (see :func:`complete_rows`); actual: every column."""
    quarantine: dict[str, str]
    """message id -> reason"""
    late: dict[str, dict[str, str]]
    """message id -> {topic, key, event_time}"""
    topics: dict[str, dict[str, int]]
    """topic -> {rows_in, valid, bad, late}"""


Expected = Outcome
Actual = Outcome


def load_expected(path: Path = EXPECTED_FILE, shift_days: int = 0) -> Expected:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    rows: dict[RowKey, dict[str, Any]] = {}
    for table, entries in data["tables"].items():
        for entry in entries:
            period_name = "hour" if "hour" in entry else "day"
            key_name = next(k for k in entry if k not in {period_name, "columns"})
            row_key = (table, entry[key_name], _shift_text(str(entry[period_name]), shift_days))
            if row_key in rows:
                raise ValueError(f"duplicate expected row {row_key}")
            rows[row_key] = {
                column: _shift_text(value, shift_days)
                if isinstance(value, str) and _ISO_MS.match(value)
                else value
                for column, value in entry["columns"].items()
            }
    late = {
        message_id: {**entry, "event_time": _shift_text(entry["event_time"], shift_days)}
        for message_id, entry in data["late"].items()
    }
    return Expected(rows, dict(data["quarantine"]), late, data["topics"])


def complete_rows(catalog: Any, rows: dict[RowKey, dict[str, Any]]) -> dict[RowKey, dict[str, Any]]:
    """Every column of every row: listed values, else 0 for count columns and None for the rest.

    ``catalog`` supplies only column names and aggregate kinds (``catalog.table(name).columns``).
    """
    complete = {}
    for row_key, listed in rows.items():
        columns = catalog.table(row_key[0]).columns
        unknown = set(listed) - {c.name for c in columns}
        if unknown:
            raise ValueError(f"{row_key}: not columns of {row_key[0]}: {sorted(unknown)}")
        complete[row_key] = {c.name: listed.get(c.name, 0 if c.agg == "count" else None) for c in columns}
    return complete


# ------------------------------------------------------------------------------------------ actual
def _plain(value: Any) -> Any:
    """A merged column value as expected.yaml writes it: pairs unwrapped, times as ISO text."""
    if isinstance(value, dict):  # first / last: struct<ts, v>
        value = value["v"]
    if isinstance(value, datetime):
        return iso_ms(value)
    return value


def _pair(value: dict[str, Any] | None) -> tuple[Any, Any] | None:
    return None if value is None else (value["ts"], value["v"])


def _roll_up(agg: str, current: Any, value: Any) -> Any:
    """Merge two partial values of one column (the sinks' merge rules, applied to the actual side)."""
    if value is None:
        return current
    if current is None:
        return value
    if agg in ("count", "sum"):
        return current + value
    if agg in ("min", "first"):  # first: the smaller (ts, v) pair
        return min(current, value)
    return max(current, value)  # max, last


def actual(out: pa.Table, plan: Any) -> Actual:
    """The transform's concatenated output, through :mod:`widehouse.stream.merge`, in expected.yaml's
    terms. Day tables' merged hourly rows are rolled up per day."""
    from widehouse.stream import merge

    rows: dict[RowKey, dict[str, Any]] = {}
    for name in plan.tables:
        table = plan.catalog.table(name)
        merged = merge.partials(out, plan, name)
        if table.grain == "hour":
            for row in merged.to_pylist():
                row_key = (name, row[table.key_name], hour_text(row["hour"]))
                if row_key in rows:
                    raise AssertionError(f"merge left two rows for {row_key}")
                rows[row_key] = {c.name: _plain(row[c.name]) for c in table.columns}
            continue
        days: dict[RowKey, dict[str, Any]] = {}
        for row in merged.to_pylist():
            row_key = (name, row[table.key_name], day_text(row["hour"]))
            state = days.setdefault(row_key, {c.name: None for c in table.columns})
            for c in table.columns:
                value = _pair(row[c.name]) if c.is_pair else row[c.name]
                state[c.name] = _roll_up(c.agg, state[c.name], value)
        for row_key, state in days.items():
            rows[row_key] = {
                c.name: _plain(state[c.name][1] if c.is_pair and state[c.name] else state[c.name])
                for c in table.columns
            }
    quarantine_rows = merge.side(out, "quarantine", "golden", "golden", 0).to_pylist()
    quarantine = {r["message_id"]: r["reason"] for r in quarantine_rows}
    if len(quarantine) != len(quarantine_rows):
        raise AssertionError("a message was quarantined twice")
    late_rows = merge.side(out, "late", "golden", "golden", 0).to_pylist()
    late = {
        r["message_id"]: {"topic": r["topic"], "key": r["key"], "event_time": iso_ms(r["event_time"])}
        for r in late_rows
    }
    if len(late) != len(late_rows):
        raise AssertionError("a message was reported late twice")
    topics = {
        topic: {"rows_in": s.rows_in, "valid": s.good, "bad": s.bad, "late": s.late}
        for topic, s in merge.topic_stats(out).items()
    }
    return Actual(rows, quarantine, late, topics)

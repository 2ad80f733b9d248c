"""Event-time rules shared by the generator's manifest and the streaming job.

An event's time is judged against the time Pulsar stamped when it was published:

- **bad** ("absurd", goes to quarantine): missing, ``<= 0``, more than ``max_future`` ahead of the
  publish time, or more than ``max_age`` behind it;
- **late** (kept in the late table, *not* in wide rows): more than ``lateness`` behind it;
- **ok** otherwise.

Periods are UTC: ``hour = floor(event_ms / 3_600_000)`` and ``day = floor(event_ms / 86_400_000)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from widehouse.contracts import values
from widehouse.contracts.periods import DAY_MS, HOUR_MS

Verdict = Literal["ok", "late", "bad"]


@dataclass(frozen=True)
class EventTimeRules:
    """Limits in milliseconds; the catalog's ``event_time`` section sets them (defaults below)."""

    lateness_ms: int = HOUR_MS
    max_future_ms: int = 5 * 60_000
    max_age_ms: int = 7 * DAY_MS

    def __post_init__(self) -> None:
        if self.lateness_ms <= 0 or self.max_future_ms < 0 or self.max_age_ms <= 0:
            raise ValueError("event-time limits must be positive")
        if self.max_age_ms <= self.lateness_ms:
            raise ValueError("max_age must be longer than lateness")


DEFAULT_RULES = EventTimeRules()


def classify_event_time(
    event_ms: int | None, publish_ms: int, rules: EventTimeRules = DEFAULT_RULES
) -> Verdict:
    """``"ok"``, ``"late"`` or ``"bad"`` for an event time against its publish time (both epoch ms)."""
    if event_ms is None or event_ms <= 0:
        return "bad"
    behind = publish_ms - event_ms
    if -behind > rules.max_future_ms or behind > rules.max_age_ms:
        return "bad"
    if behind > rules.lateness_ms:
        return "late"
    return "ok"


def hour_start(event_ms: int) -> int:
    """Start of the UTC hour of ``event_ms``, in epoch ms."""
    return event_ms - event_ms % HOUR_MS


def day_start(event_ms: int) -> int:
    """Start of the UTC day of ``event_ms``, in epoch ms."""
    return event_ms - event_ms % DAY_MS


def iso_utc(epoch_ms: int) -> str:
    """``2026-05-10T13:00:00Z`` (milliseconds shown only when not zero)."""
    moment = datetime.fromtimestamp(epoch_ms / 1000, tz=UTC)
    if epoch_ms % 1000:
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{epoch_ms % 1000:03d}Z"
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_duration_ms(text: object) -> int:
    """``"90s"``, ``"5m"``, ``"1h"``, ``"7d"``, ``"250ms"`` -> milliseconds; ValueError otherwise.

    The text is read by :func:`widehouse.contracts.values.parse_duration_ms`, with a unit required.
    """
    if isinstance(text, bool) or not isinstance(text, str | int):
        raise ValueError(f"{text!r} is not a duration such as 90s, 5m, 1h or 7d")
    if isinstance(text, int):
        raise ValueError(f"{text!r} has no unit; write e.g. {text}s or {text}m")
    return int(values.parse_duration_ms(text, bare_unit=None))

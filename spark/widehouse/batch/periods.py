"""Hours and days as users write them (``2026-11-22T09``, ``2026-11-22``), checked at the boundary."""

from __future__ import annotations

import datetime as dt
import re

from widehouse.errors import ConfigError

HOUR = dt.timedelta(hours=1)
DAY = dt.timedelta(days=1)
_HOUR_RE = re.compile(r"(\d{4})-(\d{2})-(\d{2})[T ](\d{2})(?::00(?::00)?)?(?:Z|\+00:00)?")
_DAY_RE = re.compile(r"(\d{4})-(\d{2})-(\d{2})")


def parse_hour(text: str) -> dt.datetime:
    """``YYYY-MM-DDTHH`` (optionally ``:00``, ``:00:00``, ``Z``) -> the hour's start, UTC."""
    match = _HOUR_RE.fullmatch(text.strip())
    if not match:
        raise ConfigError(f"hour {text!r} is not YYYY-MM-DDTHH (UTC), e.g. 2026-11-22T09")
    try:
        year, month, day, hour = (int(g) for g in match.groups())
        return dt.datetime(year, month, day, hour, tzinfo=dt.UTC)
    except ValueError as exc:
        raise ConfigError(f"hour {text!r} is not a real hour: {exc}") from exc


def parse_day(text: str) -> dt.date:
    """``YYYY-MM-DD`` -> a date."""
    match = _DAY_RE.fullmatch(text.strip())
    if not match:
        raise ConfigError(f"day {text!r} is not YYYY-MM-DD, e.g. 2026-11-22")
    try:
        year, month, day = (int(g) for g in match.groups())
        return dt.date(year, month, day)
    except ValueError as exc:
        raise ConfigError(f"day {text!r} is not a real day: {exc}") from exc


def as_hour(value: dt.datetime) -> dt.datetime:
    """A UTC datetime that must fall on an hour."""
    if value.tzinfo is None:
        raise ConfigError(f"hour {value.isoformat()} has no time zone (UTC expected)")
    value = value.astimezone(dt.UTC)
    if value.minute or value.second or value.microsecond:
        raise ConfigError(f"{value.isoformat()} is not the start of an hour")
    return value


def day_start(day: dt.date) -> dt.datetime:
    return dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC)


def hours_of(day: dt.date) -> list[dt.datetime]:
    start = day_start(day)
    return [start + i * HOUR for i in range(24)]


def hour_range(first: dt.datetime, last: dt.datetime) -> list[dt.datetime]:
    """Every hour from ``first`` through ``last`` (inclusive)."""
    first, last = as_hour(first), as_hour(last)
    if last < first:
        raise ConfigError(f"hour range ends ({last.isoformat()}) before it starts ({first.isoformat()})")
    count = int((last - first) / HOUR) + 1
    if count > 24 * 366:
        raise ConfigError(f"hour range {first.isoformat()} .. {last.isoformat()} spans more than a year")
    return [first + i * HOUR for i in range(count)]


def sql_time(value: dt.datetime) -> str:
    """A UTC datetime as ClickHouse's ``DateTime`` text (seconds)."""
    return value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S")

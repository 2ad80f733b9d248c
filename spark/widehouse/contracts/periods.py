"""The hour and the day: parse, floor, range, limits, the CLI argument and the SQL rendering.

Every period in Widehouse is UTC. Text is parsed here and nowhere else:

- a **moment** (:func:`parse_moment`) is an ISO 8601 date-time as the trigger forms, the settings,
  the CLI and the Asset events write it (``2026-11-22T09:00:00Z``, ``2026-11-22T17:00+08:00``,
  ``2026-11-22T09``, ``2026-11-22 09``); ``Z`` is UTC, no offset means UTC; surrounding blanks are
  ignored (a trailing newline passes a form's ``$``);
- an **hour** (:func:`parse_hour`) is a moment that falls on the start of an hour;
- a **day** (:func:`parse_day`) is ``YYYY-MM-DD``.

Bad text raises :class:`PeriodError`, both a :class:`~widehouse.errors.ConfigError` (the CLI and
the tasks report it) and a :class:`ValueError` (the settings' parsers wrap it); its ``problem`` is
the message without the value, for callers that name the value themselves.

Ranges have one limit, :data:`MAX_RANGE_HOURS` (31 days): the only ranges users give are manual
re-finalizations, and a longer one is a backfill; a caller with another bound passes ``limit``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re

from widehouse.errors import ConfigError

HOUR = dt.timedelta(hours=1)
DAY = dt.timedelta(days=1)
HOUR_MS = 3_600_000
"""An hour in epoch milliseconds (``hour start = event_ms - event_ms % HOUR_MS``)."""
DAY_MS = 86_400_000
"""A UTC day in epoch milliseconds."""
MAX_RANGE_HOURS = 24 * 31
"""Most hours one range may cover unless its caller passes another ``limit`` (longer: a backfill)."""

HOUR_EXAMPLE = "2026-11-22T09"
DAY_EXAMPLE = "2026-11-22"
_DAY_RE = re.compile(r"(\d{4})-(\d{2})-(\d{2})")


class PeriodError(ConfigError, ValueError):
    """A moment, hour or day that does not parse or does not fit; names what and the bad text."""

    def __init__(self, what: str, text: object, problem: str) -> None:
        self.what = what
        self.text = text
        self.problem = problem
        super().__init__(f"{what} {problem}" if text is None else f"{what} {text!r}: {problem}")


# -- parsing ------------------------------------------------------------------------------------


def parse_moment(text: str | None, what: str = "time") -> dt.datetime:
    """An ISO 8601 date-time (``Z`` allowed; no offset = UTC) -> an aware UTC datetime."""
    if text is None or not str(text).strip():
        raise PeriodError(what, None, "is required")
    try:
        moment = dt.datetime.fromisoformat(str(text).strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise PeriodError(
            what, text, f"expected an ISO 8601 date-time such as {HOUR_EXAMPLE}:00:00Z (no offset = UTC)"
        ) from exc
    return as_utc(moment)


def parse_hour(text: str | None, what: str = "hour") -> dt.datetime:
    """A moment on the start of an hour (``2026-11-22T09``, ``2026-11-22T09:00Z``, ...) -> UTC."""
    try:
        moment = parse_moment(text, what)
    except PeriodError as exc:
        if text is None or not str(text).strip():
            raise
        raise PeriodError(
            what, text, f"expected a UTC hour such as {HOUR_EXAMPLE} or {HOUR_EXAMPLE}:00Z"
        ) from exc.__cause__
    return _whole_hour(moment, what, text)


def parse_day(text: str | None, what: str = "day") -> dt.date:
    """``YYYY-MM-DD`` (blanks around it ignored) -> a date."""
    if text is None or not str(text).strip():
        raise PeriodError(what, None, "is required")
    match = _DAY_RE.fullmatch(str(text).strip())
    if not match:
        raise PeriodError(what, text, f"expected a day YYYY-MM-DD such as {DAY_EXAMPLE}")
    try:
        year, month, day = (int(g) for g in match.groups())
        return dt.date(year, month, day)
    except ValueError as exc:
        raise PeriodError(what, text, f"expected a real day ({exc})") from exc


def hour_argument(text: str) -> dt.datetime:
    """The argparse ``type`` of an ``--hour`` option (a usage error names the option)."""
    try:
        return parse_hour(text)
    except PeriodError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def day_argument(text: str) -> dt.date:
    """The argparse ``type`` of a ``--day`` option (a usage error names the option)."""
    try:
        return parse_day(text)
    except PeriodError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


# -- checking and flooring -----------------------------------------------------------------------


def as_utc(moment: dt.datetime) -> dt.datetime:
    """``moment`` as a plain, aware UTC ``datetime`` (naive means UTC: Airflow and our texts mean it).

    Always a new ``datetime``, never a subclass: Airflow hands tasks pendulum DateTimes, and one whose
    tzinfo is the standard library's UTC loses its zone on ``+ timedelta`` (then comparing it with an
    aware watermark raises TypeError)."""
    aware = (moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)).astimezone(dt.UTC)
    return dt.datetime(
        aware.year,
        aware.month,
        aware.day,
        aware.hour,
        aware.minute,
        aware.second,
        aware.microsecond,
        tzinfo=dt.UTC,
    )


def as_hour(value: dt.datetime, *, assume_utc: bool = False) -> dt.datetime:
    """An aware datetime that must fall on the start of an hour, as UTC.

    A naive ``value`` is refused unless ``assume_utc`` (then it is read as UTC)."""
    if value.tzinfo is None and not assume_utc:
        raise PeriodError("hour", value.isoformat(), "must have a time zone (UTC expected)")
    return _whole_hour(as_utc(value), "hour", value.isoformat())


def floor_hour(moment: dt.datetime) -> dt.datetime:
    """The start of the UTC hour holding ``moment`` (naive means UTC)."""
    return as_utc(moment).replace(minute=0, second=0, microsecond=0)


def day_start(day: dt.date) -> dt.datetime:
    """Midnight UTC starting ``day``."""
    return dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC)


def hours_of(day: dt.date) -> list[dt.datetime]:
    """The 24 hours of a UTC day."""
    start = day_start(day)
    return [start + i * HOUR for i in range(24)]


def hour_range(first: dt.datetime, last: dt.datetime, *, limit: int = MAX_RANGE_HOURS) -> list[dt.datetime]:
    """Every hour from ``first`` through ``last`` inclusive (both whole aware hours), at most ``limit``."""
    first, last = as_hour(first), as_hour(last)
    if last < first:
        raise PeriodError(
            "hour range", None, f"ends ({last.isoformat()}) before it starts ({first.isoformat()})"
        )
    count = int((last - first) / HOUR) + 1
    if count > limit:
        raise PeriodError(
            "hour range", None, f"of {count} hours is more than {limit}; use a backfill for longer ranges"
        )
    return [first + i * HOUR for i in range(count)]


def hours_between(
    first: dt.datetime, last: dt.datetime, *, limit: int = MAX_RANGE_HOURS
) -> list[dt.datetime]:
    """:func:`hour_range` of the hours holding ``first`` and ``last`` (any moments; naive = UTC)."""
    return hour_range(floor_hour(first), floor_hour(last), limit=limit)


# -- rendering -------------------------------------------------------------------------------------


def hour_text(hour: dt.datetime) -> str:
    """An hour as users and the CLI's ``--hour`` write it: ``YYYY-MM-DDTHH`` (UTC)."""
    return as_utc(hour).strftime("%Y-%m-%dT%H")


def sql_time(value: dt.datetime) -> str:
    """A UTC datetime as ClickHouse's ``DateTime`` text (seconds)."""
    return value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _whole_hour(moment: dt.datetime, what: str, text: object) -> dt.datetime:
    if moment.minute or moment.second or moment.microsecond:
        raise PeriodError(what, text, "must be the start of an hour (minutes and seconds zero)")
    return moment


__all__ = [
    "DAY",
    "DAY_MS",
    "HOUR",
    "HOUR_MS",
    "MAX_RANGE_HOURS",
    "PeriodError",
    "as_hour",
    "as_utc",
    "day_argument",
    "day_start",
    "floor_hour",
    "hour_argument",
    "hour_range",
    "hour_text",
    "hours_between",
    "hours_of",
    "parse_day",
    "parse_hour",
    "parse_moment",
    "sql_time",
]

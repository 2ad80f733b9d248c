"""The hour and the day (``widehouse.contracts.periods``): parsed, floored and ranged in one place."""

from __future__ import annotations

import argparse
import ast
import datetime as dt
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from widehouse.contracts import periods
from widehouse.contracts.periods import (
    PeriodError,
    as_hour,
    floor_hour,
    hour_range,
    hours_between,
    parse_day,
    parse_hour,
    parse_moment,
)
from widehouse.errors import ConfigError

ROOT = Path(__file__).parents[2]
UTC = dt.UTC
H9 = dt.datetime(2026, 11, 22, 9, tzinfo=UTC)


@pytest.mark.parametrize(
    "text",
    [
        "2026-11-22T09",
        "2026-11-22T09:00",
        "2026-11-22T09:00:00",
        "2026-11-22 09",
        "2026-11-22T09Z",
        "2026-11-22T09:00Z",  # the settings' example
        "2026-11-22T09:00:00+00:00",
        "2026-11-22T11:00:00+02:00",  # an offset is converted to UTC
        " 2026-11-22T09:00:00Z\n",  # a form's `$` lets a trailing newline through
    ],
)
def test_hours_as_users_write_them(text: str) -> None:
    assert parse_hour(text) == H9


@pytest.mark.parametrize(
    "text", ["2026-11-22T9", "2026-11-22T24", "2026-02-30T01", "2026-11-22T09:30", "x", "", "2026-11-22T09z"]
)
def test_bad_hours_are_named(text: str) -> None:
    with pytest.raises(ConfigError, match="hour"):
        parse_hour(text)


def test_an_error_is_a_config_error_and_a_value_error_with_its_problem() -> None:
    with pytest.raises(PeriodError) as info:
        parse_hour("2026-11-22T09:30Z", "--hour")
    assert isinstance(info.value, ConfigError) and isinstance(info.value, ValueError)
    problem = "must be the start of an hour (minutes and seconds zero)"
    assert str(info.value) == f"--hour '2026-11-22T09:30Z': {problem}"
    assert info.value.problem == problem
    with pytest.raises(PeriodError, match="UTC hour such as"):
        parse_hour("yesterday")
    with pytest.raises(PeriodError, match=r"^param first_hour is required$"):
        parse_moment(None, "param first_hour")


def test_a_moment_is_any_iso_time_and_naive_means_utc() -> None:
    assert parse_moment("2026-11-22T09:59:59.5") == H9 + dt.timedelta(minutes=59, seconds=59.5)
    assert parse_moment("2026-11-22T17:00:00+08:00") == H9
    with pytest.raises(PeriodError, match="ISO 8601"):
        parse_moment("tomorrow", "param last_hour")


def test_days() -> None:
    assert parse_day("2026-11-22") == dt.date(2026, 11, 22)
    assert parse_day("2026-11-22\n") == dt.date(2026, 11, 22)
    with pytest.raises(ConfigError, match="2026-13-01"):
        parse_day("2026-13-01")
    for bad in ("20261122", "2026-11-22 9h", "22.11.2026"):
        with pytest.raises(PeriodError, match="YYYY-MM-DD"):
            parse_day(bad)
    with pytest.raises(PeriodError, match=r"^param day is required$"):
        parse_day("", "param day")


def test_ranges_have_one_limit_unless_a_caller_passes_another() -> None:
    assert hour_range(H9, H9 + 2 * periods.HOUR) == [H9, H9 + periods.HOUR, H9 + 2 * periods.HOUR]
    with pytest.raises(ConfigError, match="before it starts"):
        hour_range(H9, H9 - periods.HOUR)
    last = H9 + (periods.MAX_RANGE_HOURS - 1) * periods.HOUR
    assert len(hour_range(H9, last)) == periods.MAX_RANGE_HOURS == 744
    with pytest.raises(ConfigError, match="745 hours is more than 744"):
        hour_range(H9, last + periods.HOUR)
    assert len(hour_range(H9, last + periods.HOUR, limit=24 * 366)) == 745
    with pytest.raises(ConfigError, match="must be the start of an hour"):
        hour_range(H9 + dt.timedelta(minutes=5), last)


def test_hours_between_takes_the_hours_holding_two_moments() -> None:
    hours = hours_between(H9 + dt.timedelta(minutes=59), H9 + dt.timedelta(hours=2, minutes=1))
    assert hours == [H9, H9 + periods.HOUR, H9 + 2 * periods.HOUR]
    assert hours_between(dt.datetime(2026, 11, 22, 9, 30), dt.datetime(2026, 11, 22, 9, 45)) == [H9]
    with pytest.raises(ConfigError, match=r"ends .* before it starts"):
        hours_between(H9, H9 - periods.HOUR)
    with pytest.raises(ConfigError, match="745 hours is more than 744"):
        hours_between(H9, H9 + dt.timedelta(hours=744))


def test_as_hour_wants_a_zone_unless_told_naive_is_utc() -> None:
    with pytest.raises(ConfigError, match="must have a time zone"):
        as_hour(dt.datetime(2026, 11, 22, 9))
    assert as_hour(dt.datetime(2026, 11, 22, 9), assume_utc=True) == H9
    with pytest.raises(ConfigError, match="must be the start of an hour"):
        as_hour(H9 + dt.timedelta(minutes=5))


@given(st.datetimes(min_value=dt.datetime(1000, 1, 1), timezones=st.just(UTC)))
def test_floor_and_render_round_trip(moment: dt.datetime) -> None:
    hour = floor_hour(moment)
    assert hour <= moment < hour + periods.HOUR
    assert parse_hour(periods.hour_text(hour)) == hour
    day = hour.date()
    assert periods.hours_of(day)[hour.hour] == hour == periods.day_start(day) + hour.hour * periods.HOUR
    assert periods.sql_time(hour) == hour.strftime("%Y-%m-%d %H:00:00")


def test_the_cli_argument_types_report_a_usage_error() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hour", type=periods.hour_argument)
    parser.add_argument("--day", type=periods.day_argument)
    args = parser.parse_args(["--hour", "2026-11-22T09", "--day", "2026-11-22"])
    assert (args.hour, args.day) == (H9, dt.date(2026, 11, 22))
    with pytest.raises(argparse.ArgumentTypeError, match="must be the start of an hour"):
        periods.hour_argument("2026-11-22T09:30")
    with pytest.raises(argparse.ArgumentTypeError, match="YYYY-MM-DD"):
        periods.day_argument("22.11.2026")


# -- one definition ------------------------------------------------------------------------------

_HOME = ROOT / "spark" / "widehouse" / "contracts" / "periods.py"
_PERIOD_FUNCTIONS = {
    "parse_hour",
    "parse_day",
    "parse_moment",
    "hour_range",
    "hours_between",
    "floor_hour",
    "utc_hour",
    "as_hour",
    "hours_of",
    "sql_time",
}
"""Names only the periods contract may define (another module with one restates it)."""
_TEXT_TO_TIME = {"fromisoformat", "strptime"}
"""Parsing a date or time from text: only the periods contract does it."""
_ALLOWED = {("spark/widehouse/settings/parsers.py", "_parse_hour")}
"""Adapters that only call the contract (the settings' parser turns its error into their ValueError)."""


def _library_files() -> list[Path]:
    files = [*(ROOT / "spark").rglob("*.py"), *(ROOT / "dags").rglob("*.py"), *(ROOT / "bench").rglob("*.py")]
    return sorted(f for f in files if f != _HOME)


def test_hours_and_days_are_defined_and_parsed_only_in_the_periods_contract() -> None:
    found: list[str] = []
    for path in _library_files():
        where = path.relative_to(ROOT)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                if node.name.lstrip("_") in _PERIOD_FUNCTIONS and (str(where), node.name) not in _ALLOWED:
                    found.append(f"{where}:{node.lineno} defines {node.name}")
            elif isinstance(node, ast.Attribute) and node.attr in _TEXT_TO_TIME:
                found.append(f"{where}:{node.lineno} parses a time with {node.attr}")
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name) and target.id.endswith(("HOUR_MS", "DAY_MS")):
                        found.append(f"{where}:{node.lineno} restates {target.id}")
            elif (
                isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value == "%Y-%m-%dT%H"
            ):
                found.append(f"{where}:{node.lineno} renders an hour by hand")
    assert found == [], "use widehouse.contracts.periods:\n" + "\n".join(found)


def test_an_airflow_hour_is_a_plain_utc_datetime_that_stays_aware() -> None:
    """Airflow passes pendulum DateTimes; one with the standard library's UTC as its tzinfo loses
    its zone on ``+ timedelta``, and the gate's comparison with a watermark then raised TypeError."""
    pendulum = pytest.importorskip("pendulum")
    import datetime as dt

    from widehouse.contracts.periods import HOUR, as_hour, as_utc, floor_hour

    given = pendulum.datetime(2026, 11, 26, 2, tz="UTC").astimezone(dt.UTC)
    hour = as_hour(given)
    assert type(hour) is dt.datetime
    assert hour == dt.datetime(2026, 11, 26, 2, tzinfo=dt.UTC)
    later = hour + HOUR + dt.timedelta(minutes=5)
    assert later.tzinfo is not None
    assert dt.datetime(2026, 11, 26, 3, 10, tzinfo=dt.UTC) > later  # aware against aware
    assert type(as_utc(given)) is dt.datetime
    assert type(floor_hour(pendulum.datetime(2026, 11, 26, 2, 30, tz="Asia/Shanghai"))) is dt.datetime

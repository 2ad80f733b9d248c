"""One family of text-value parsers: the same text gives the same value in every entry point.

The entry points are the settings (``WIDEHOUSE_*``), the pulsar source's and sink's options, the CLI's
argparse types and the catalog's durations; all read through :mod:`widehouse.contracts.values`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import pytest

from widehouse.catalog.eventtime import parse_duration_ms as catalog_duration_ms
from widehouse.commands.plan_cmd import _knob
from widehouse.commands.plan_cmd import _positive_int as cli_positive_int
from widehouse.commands.pulsar_cmd import parse_duration as cli_duration_s
from widehouse.contracts import values
from widehouse.errors import ConfigError
from widehouse.settings import PulsarSettings, load_settings
from widehouse.source.options import parse_options
from widehouse.source.sink_options import parse_sink_options

cli_rate = _knob("slot_capacity")
cli_bytes = _knob("message_cost")
PULSAR = PulsarSettings("pulsar://broker:6650", "http://broker:8080", None)
A = "persistent://t/ns/a"

BOOLEANS = [
    ("true", True),
    ("TRUE", True),
    ("1", True),
    ("yes", True),
    ("Yes", True),
    ("on", True),
    ("ON", True),
    ("false", False),
    ("False", False),
    ("0", False),
    ("no", False),
    ("off", False),
    ("Off", False),
]


def _setting_bool(tmp_path: Path, text: str) -> bool:
    return load_settings({"WIDEHOUSE_STATE_DIR": str(tmp_path), "WIDEHOUSE_SPARK_UI": text}).spark.ui_enabled


def _source_bool(text: str) -> bool:
    return parse_options({"topics": A, "failOnDataLoss": text}, PULSAR, batch=True).fail_on_data_loss


def _sink_bool(text: str) -> bool:
    return parse_sink_options({"topic": A, "requireExactlyOnce": text}, PULSAR).require_exactly_once


@pytest.mark.parametrize(("text", "expected"), BOOLEANS)
def test_booleans_agree_in_every_family(tmp_path: Path, text: str, expected: bool) -> None:
    assert values.parse_bool(text) is expected
    assert _setting_bool(tmp_path, text) is expected
    assert _source_bool(text) is expected
    assert _sink_bool(text) is expected


@pytest.mark.parametrize("text", ["on", "off", "ON"])
def test_source_and_sink_options_now_accept_on_and_off(text: str) -> None:
    """A behaviour change: before the one family, the options took only true/false, 1/0, yes/no."""
    assert _source_bool(text) is (text.lower() == "on")
    assert _sink_bool(text) is (text.lower() == "on")


@pytest.mark.parametrize("text", ["maybe", "2", "t", "y", "enabled"])
def test_bad_booleans_fail_everywhere_naming_option_and_value(tmp_path: Path, text: str) -> None:
    with pytest.raises(values.ValueTextError, match="must be true or false"):
        values.parse_bool(text)
    settings_message = rf"^WIDEHOUSE_SPARK_UI='{text}' is invalid: expected true or false"
    with pytest.raises(ConfigError, match=settings_message):
        _setting_bool(tmp_path, text)
    with pytest.raises(ConfigError, match=rf"^option failOnDataLoss='{text}' must be true or false$"):
        _source_bool(text)
    with pytest.raises(ConfigError, match=rf"^option requireExactlyOnce='{text}' must be true or false$"):
        _sink_bool(text)


@pytest.mark.parametrize(("text", "expected"), [("1", 1), ("7", 7), ("64", 64), (" 12 ", 12)])
def test_positive_integers_agree_in_every_family(tmp_path: Path, text: str, expected: int) -> None:
    assert values.parse_int(text, minimum=1) == expected
    env = {"WIDEHOUSE_STATE_DIR": str(tmp_path), "WIDEHOUSE_SUPERVISOR_MAX_FAILURES": text}
    assert load_settings(env).supervisor.max_failures == expected
    assert parse_options({"topics": A, "minTasks": text}, PULSAR, batch=True).min_tasks == expected
    assert parse_sink_options({"topic": A, "maxPendingMessages": text}, PULSAR).max_pending == expected
    assert cli_positive_int(text) == expected


@pytest.mark.parametrize(("text", "problem"), [("lots", "is not an integer"), ("0", "must be >= 1")])
def test_bad_integers_name_the_value_everywhere(tmp_path: Path, text: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=rf"^option minTasks='{text}' {problem}$"):
        parse_options({"topics": A, "minTasks": text}, PULSAR, batch=True)
    with pytest.raises(ConfigError, match=rf"^option maxPendingMessages='{text}' {problem}$"):
        parse_sink_options({"topic": A, "maxPendingMessages": text}, PULSAR)
    with pytest.raises(argparse.ArgumentTypeError, match=rf"^'{text}' {problem}$"):
        cli_positive_int(text)
    env = {"WIDEHOUSE_STATE_DIR": str(tmp_path), "WIDEHOUSE_SUPERVISOR_MAX_FAILURES": text}
    with pytest.raises(ConfigError, match=rf"^WIDEHOUSE_SUPERVISOR_MAX_FAILURES='{text}' is invalid"):
        load_settings(env)


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("500ms", 500),
        ("30s", 30_000),
        ("10m", 600_000),
        ("2h", 7_200_000),
        ("7d", 604_800_000),
        ("1.5s", 1500),
    ],
)
def test_durations_agree_in_every_family(text: str, ms: int) -> None:
    assert values.parse_duration_ms(text) == ms
    assert parse_options({"topics": A, "readTimeout": text}, PULSAR, batch=True).read_timeout_ms == ms
    assert cli_duration_s(text) == ms / 1000
    assert catalog_duration_ms(text) == ms


def test_a_bare_duration_is_in_the_callers_unit() -> None:
    assert values.parse_duration_ms("90") == 90
    assert values.parse_duration_ms("90", bare_unit="s") == 90_000
    with pytest.raises(values.ValueTextError, match="has no unit"):
        values.parse_duration_ms("90", bare_unit=None)


@pytest.mark.parametrize(
    ("parse", "text", "message"),
    [
        (values.parse_bool, "maybe", "x='maybe' must be true or false"),
        (values.parse_int, "1.5", "x='1.5' is not an integer"),
        (values.parse_float, "abc", "x='abc' is not a number"),
        (values.parse_float, "nan", "x='nan' must be a finite number"),
        (values.parse_duration_ms, "soon", "x='soon' is not a duration"),
    ],
)
def test_the_error_names_the_option_and_the_value(
    parse: Callable[..., object], text: str, message: str
) -> None:
    with pytest.raises(values.ValueTextError) as info:
        parse(text, "x")
    assert str(info.value).startswith(message)
    assert info.value.text == text and info.value.name == "x"


def test_bounds_and_choices() -> None:
    assert values.parse_int("5", minimum=1, maximum=9) == 5
    with pytest.raises(values.ValueTextError, match="must be between 1 and 9"):
        values.parse_int("10", minimum=1, maximum=9)
    with pytest.raises(values.ValueTextError, match=r"must be <= 1\.0"):
        values.parse_float("1.5", maximum=1.0)
    assert values.parse_choice("local", ("local", "cluster")) == "local"
    with pytest.raises(values.ValueTextError, match="must be one of local, cluster"):
        values.parse_choice("yarn", ("local", "cluster"))


@pytest.mark.parametrize(
    ("text", "number"),
    [("20000000", 20e6), ("20M", 20e6), ("20MB", 20e6), ("20MB/s", 20e6), ("1.5k", 1500.0)],
)
def test_byte_sizes_agree_with_the_cli(text: str, number: float) -> None:
    assert values.parse_bytes(text) == number
    assert cli_rate(text) == number
    assert cli_bytes(text) == number


@pytest.mark.parametrize(
    ("flag", "field", "text", "expected"),
    [
        ("--slot-capacity", "slot_capacity", "20M", 20e6),
        ("--slot-capacity", "slot_capacity", "20MB/s", 20e6),
        ("--partition-capacity", "partition_capacity", "1.5k", 1500.0),
        ("--message-cost", "message_cost", "1k", 1000.0),
        ("--target-fill", "target_fill", "0.75", 0.75),
        ("--imbalance", "imbalance", "0", 0.0),
        ("--max-partitions", "max_partitions", "12", 12),
    ],
)
def test_a_planner_flag_and_its_variable_read_the_same_forms(
    tmp_path: Path, flag: str, field: str, text: str, expected: float
) -> None:
    variable = "WIDEHOUSE_PLAN_" + flag.removeprefix("--").replace("-", "_").upper()
    settings = load_settings({"WIDEHOUSE_STATE_DIR": str(tmp_path), variable: text})
    assert getattr(settings.planner, field) == expected
    assert _knob(field)(text) == expected


@pytest.mark.parametrize(
    ("field", "text"), [("slot_capacity", "0"), ("target_fill", "1.5"), ("max_partitions", "0")]
)
def test_a_planner_flag_and_its_variable_refuse_the_same_texts(tmp_path: Path, field: str, text: str) -> None:
    variable = "WIDEHOUSE_PLAN_" + field.upper()
    with pytest.raises(ConfigError, match=rf"^{variable}='{text}' is invalid"):
        load_settings({"WIDEHOUSE_STATE_DIR": str(tmp_path), variable: text})
    with pytest.raises(argparse.ArgumentTypeError, match=rf"^'{text}' "):
        _knob(field)(text)


def test_bad_byte_sizes_keep_the_cli_wording() -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=r"^'fast' is not a rate; use bytes/s"):
        cli_rate("fast")
    with pytest.raises(argparse.ArgumentTypeError, match=r"^'0' must be > 0$"):
        cli_rate("0")
    with pytest.raises(argparse.ArgumentTypeError, match=r"^'-1' is not a number of bytes$"):
        cli_bytes("-1")

"""``widehouse pulsar cleanup|lag`` parse their arguments."""

from __future__ import annotations

import argparse

import pytest

from widehouse.cli import build_parser
from widehouse.commands.pulsar_cmd import parse_duration


def test_durations() -> None:
    assert parse_duration("90") == 90
    assert parse_duration("30m") == 1800
    assert parse_duration("24h") == 86400
    assert parse_duration("1.5d") == 129600
    with pytest.raises(argparse.ArgumentTypeError, match="not a duration"):
        parse_duration("soon")


def test_cleanup_and_lag_arguments() -> None:
    parser = build_parser()
    args = parser.parse_args(
        ["pulsar", "cleanup", "--namespace", "t/ns", "--ttl", "2h", "--retire", "g1", "--dry-run"]
    )
    assert (args.namespace, args.ttl, args.retire, args.dry_run) == (["t/ns"], 7200, ["g1"], True)
    assert args.prefix == "widehouse-"
    args = parser.parse_args(["pulsar", "lag", "--app", "g1", "--app", "g2"])
    assert args.app == ["g1", "g2"] and args.namespace == []
    with pytest.raises(SystemExit):
        parser.parse_args(["pulsar", "cleanup", "--ttl", "forever"])

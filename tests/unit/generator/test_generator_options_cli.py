"""Generator options are checked at the boundary; manifest helpers; the CLI in dry-run mode."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from widehouse.errors import ConfigError
from widehouse.generator import GenerateOptions, diff_rows, generate, normalize, uid_of
from widehouse.generator.schedule import Timeline, zipf_cdf
from widehouse.settings import Settings

ROOT = Path(__file__).parents[3]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "--count or --duration"),
        ({"count": 10, "duration_s": 5}, "not both"),
        ({"count": 0}, "--count 0"),
        ({"duration_s": 10, "rate": 0}, "--duration needs a --rate"),
        ({"count": 10, "rate": -1}, "--rate"),
        ({"count": 10, "users": 0}, "--users"),
        ({"count": 10, "user_skew": 9}, "--user-skew"),
        ({"count": 10, "topic_skew": -1}, "--topic-skew"),
        ({"count": 10, "bad_rate": 1.5}, "--bad-rate"),
        ({"count": 10, "bad_rate": 0.6, "late_rate": 0.6}, "must not exceed 1"),
        ({"count": 10, "bad_classes": ("gibberish",)}, "--bad-classes"),
        ({"count": 10, "burst_factor": 0.5}, "--burst-factor"),
        ({"count": 10, "burst_factor": 2, "burst_every_s": 5, "burst_length_s": 5}, "--burst-length"),
        ({"count": 10, "variants": 0}, "--variants"),
        ({"count": 10, "topics": "("}, "--topics"),
        ({"count": 10, "tenant_suffix": "Bad_Suffix"}, "--tenant-suffix"),
        ({"count": 10, "partitions": 0}, "--partitions"),
        ({"count": 10, "base_time_ms": -5}, "--base-time"),
        ({"count": 10, "timing_margin_ms": -1}, "timing_margin_ms -1"),
    ],
)
def test_bad_options_name_the_option(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        GenerateOptions(**options).validate()


@pytest.mark.parametrize("options", [{"dry_run": True}, {"pregenerate": True}])
def test_stop_is_refused_where_chunks_are_made_ahead(options: dict[str, Any], settings: Settings) -> None:
    # checked before anything is generated or published (no Pulsar needed)
    with pytest.raises(ConfigError, match=f"not pregenerate={options.get('pregenerate', False)}"):
        generate(settings, GenerateOptions(count=10, **options), stop=threading.Event())


def test_duration_and_bursts_give_the_message_count() -> None:
    assert Timeline(GenerateOptions(duration_s=10, rate=100)).count_for(10) == 1000
    bursty = Timeline(
        GenerateOptions(duration_s=60, rate=100, burst_factor=3, burst_every_s=30, burst_length_s=10)
    )
    assert bursty.count_for(60) == 2 * (3 * 100 * 10 + 100 * 20)
    cdf = zipf_cdf(4, 1.0)
    assert cdf[-1] == 1.0 and cdf[0] == pytest.approx(1 / (1 + 1 / 2 + 1 / 3 + 1 / 4))


def test_keys() -> None:
    assert uid_of(0) == 10_000_001 and uid_of(9, "string") == "u10000010"


def test_diff_rows_normalizes_sink_values_and_tolerates_float_order() -> None:
    hour = 1_778_400_000_000
    expected = {(1, hour): {"n": 2, "usd": 0.3, "at": hour + 5, "city": "x"}}
    moment = dt.datetime.fromtimestamp(hour / 1000, tz=dt.UTC)
    actual = {
        (1, moment.replace(tzinfo=None)): {
            "n": 2,
            "usd": 0.1 + 0.2,
            "at": moment + dt.timedelta(milliseconds=5),
            "city": "x",
        }
    }
    assert diff_rows(expected, actual) == []
    actual[(1, moment.replace(tzinfo=None))]["n"] = 3
    assert diff_rows(expected, actual) == ["1 @ 2026-05-10T08:00:00Z: n expected 2, got 3"]
    assert diff_rows(expected, {}) == ["missing row 1 @ 2026-05-10T08:00:00Z"]
    assert normalize(dt.date(2026, 5, 10)) == 1_778_371_200_000


def run_cli(*args: str, state: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "widehouse", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "WIDEHOUSE_STATE_DIR": str(state)},
        timeout=120,
        check=False,
    )


DRY_RUN = ("generate", "--dry-run", "--count", "3000", "--rate", "0", "--base-time", "2026-05-10T08:00:00Z")
"""A small dry run: 3,000 events generated, nothing published."""


def test_generate_dry_run_writes_the_manifest(tmp_path: Path) -> None:
    out = run_cli(*DRY_RUN, "--seed", "9", "--users", "40", state=tmp_path)
    assert out.returncode == 0, out.stderr
    manifest = json.loads((tmp_path / "generator" / "manifest.json").read_text())
    assert manifest["totals"]["sent"] == 3000 and manifest["run"]["dry_run"] is True
    assert manifest["options"]["base_time"] == "2026-05-10T08:00:00Z"
    assert "dry run: nothing published" in out.stdout and "total" in out.stdout
    assert "\r" not in out.stderr  # not a terminal: no status line


def test_generate_shows_its_progress_on_a_terminal(tmp_path: Path) -> None:
    import pty

    primary, terminal = pty.openpty()
    try:
        out = subprocess.run(
            [sys.executable, "-m", "widehouse", *DRY_RUN, "--users", "40"],
            stdout=subprocess.PIPE,
            stderr=terminal,
            env={**os.environ, "WIDEHOUSE_STATE_DIR": str(tmp_path)},
            timeout=120,
            check=False,
        )
    finally:
        os.close(terminal)
    shown = b""
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # the terminal's other end is closed: everything was read
            break
        if not chunk:
            break
        shown += chunk
    os.close(primary)
    assert out.returncode == 0
    # the first chunk always shows; the line is rewritten in place (\r) and ended before the summary
    assert shown.startswith(b"\rgenerated ") and b" / 3,000 (" in shown and shown.endswith(b"\n")


def test_generate_refuses_a_stale_base_time_when_publishing(tmp_path: Path) -> None:
    out = run_cli("generate", "--count", "10", "--base-time", "2020-01-01T00:00:00", state=tmp_path)
    assert out.returncode == 2
    assert "behind now" in out.stderr and "--dry-run" in out.stderr


def test_catalog_commands(tmp_path: Path) -> None:
    check = run_cli("catalog", "check", state=tmp_path)
    assert check.returncode == 0, check.stderr
    assert "42 topics in 6 namespaces of 2 tenants" in check.stdout
    ddl = run_cli("catalog", "ddl", "--check", state=tmp_path)
    assert ddl.returncode == 0, ddl.stdout + ddl.stderr
    show = run_cli("catalog", "show", "persistent://bigolive/live/gift_send", state=tmp_path)
    assert "big_gifts_sent" in show.stdout and "gift.diamonds >= 1000" in show.stdout
    broken = tmp_path / "schemas"
    (broken / "tables").mkdir(parents=True)
    (broken / "tables" / "t.yaml").write_text(
        "wide_table: t\ngrain: hour\nkey: {name: uid, type: long}\ncolumns: [x]\nx: 1\n"
    )
    bad = run_cli("catalog", "check", "--schemas", str(broken), state=tmp_path)
    assert bad.returncode == 1
    assert "t.yaml" in bad.stderr and "unknown key 'x'" in bad.stderr and "Traceback" not in bad.stderr

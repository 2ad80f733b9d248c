"""The frame the CLI and the spark-submit jobs share: a deliberate error is one line and an exit code."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from widehouse.entrypoint import UseCase, run_job
from widehouse.errors import ConfigError, WidehouseError
from widehouse.settings import Settings

ROOT = Path(__file__).parents[2]
DOC = "A test job.\n\nMore words."


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--code", type=int, default=0)


def _returns(args: argparse.Namespace, settings: Settings) -> int:
    return int(args.code)


def _bad_config(args: argparse.Namespace, settings: Settings) -> int:
    raise ConfigError("table 'nope' is not in the catalog")


def _fails(args: argparse.Namespace, settings: Settings) -> int:
    raise WidehouseError("HBase is unreachable")


def test_the_use_cases_exit_code_is_the_jobs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("WIDEHOUSE_STATE_DIR", str(tmp_path))
    assert run_job("job", DOC, _arguments, _returns, ["--code", "4"]) == 4


@pytest.mark.parametrize(
    ("use_case", "code", "line"),
    [
        (_bad_config, 2, "job: configuration error: table 'nope' is not in the catalog\n"),
        (_fails, 1, "job: error: HBase is unreachable\n"),
    ],
)
def test_a_deliberate_error_is_one_line_and_an_exit_code(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    use_case: UseCase,
    code: int,
    line: str,
) -> None:
    monkeypatch.setenv("WIDEHOUSE_STATE_DIR", str(tmp_path))
    assert run_job("job", DOC, _arguments, use_case, []) == code
    assert capsys.readouterr().err == line


def test_a_job_file_reports_bad_settings_under_its_own_name(tmp_path: Path) -> None:
    env = {**os.environ, "WIDEHOUSE_STATE_DIR": str(tmp_path), "WIDEHOUSE_SPARK_UI": "maybe"}
    out = subprocess.run(
        [sys.executable, str(ROOT / "spark" / "jobs" / "daily_merge.py"), "--day", "2026-11-22"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith("daily_merge: configuration error: WIDEHOUSE_SPARK_UI='maybe' is invalid")


def test_a_job_files_usage_names_the_file_and_its_summary() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "spark" / "jobs" / "finalize_hour.py"), "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0
    assert out.stdout.startswith("usage: finalize_hour.py ")
    assert "Finalize an hour of an hourly wide table (spark-submit entrypoint)." in out.stdout


@pytest.mark.parametrize("verbose", [False, True])
def test_py4js_chatter_shows_only_when_verbose(verbose: bool) -> None:
    # a fresh interpreter: logging is configured once per process, as a door does it
    code = (
        "import logging\n"
        "from widehouse.entrypoint import configure_logging\n"
        f"configure_logging({verbose})\n"
        "logging.getLogger('py4j.clientserver').info('Received command c on object id p0')\n"
        "logging.getLogger('py4j.clientserver').warning('a py4j warning')\n"
        "logging.getLogger('widehouse.stream').info('group g001 batch 3: 10 in')\n"
        # py4j's gateway logs through the root logger itself: lines as its own code makes them
        "import py4j.java_gateway as gateway\n"
        'exec(compile("import logging\\n"\n'
        "    \"logging.info('Exception while sending command.', exc_info=True)\\n\"\n"
        "    \"logging.error('a py4j error through root')\", gateway.__file__, 'exec'))\n"
        "logging.info('a root line from elsewhere')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert "group g001 batch 3: 10 in" in done.stderr
    assert "a py4j warning" in done.stderr
    assert ("Received command c on object id p0" in done.stderr) is verbose
    assert ("Exception while sending command." in done.stderr) is verbose
    assert "a py4j error through root" in done.stderr
    assert "a root line from elsewhere" in done.stderr

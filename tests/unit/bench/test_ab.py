"""``python -m bench ab``: another revision's library against this one's, in alternating pairs."""

from __future__ import annotations

import importlib.util
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from bench import ab


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def test_the_old_side_is_the_revisions_library(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "spark" / "lib").mkdir(parents=True)
    _git(repo, "init", "-q")
    for text in ("old = 1\n", "new = 2\n"):
        (repo / "spark" / "lib" / "mod.py").write_text(text)
        _git(repo, "add", ".")
        _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", text)
    path = ab.export_library("HEAD~1", tmp_path / "out", repo=repo)
    assert (path / "lib" / "mod.py").read_text() == "old = 1\n"
    # byte-compiled, as the checkout's library is: else where PYTHONDONTWRITEBYTECODE is set each of
    # the old side's processes compiled it from source again, and lost every start-up comparison
    assert Path(importlib.util.cache_from_source(str(path / "lib" / "mod.py"))).is_file()
    with pytest.raises(ab.AbError, match="'no-such-rev'"):
        ab.export_library("no-such-rev", tmp_path / "other", repo=repo)


def test_a_library_that_does_not_compile_is_refused(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "broken.py").write_text("def f(:\n")
    with pytest.raises(ab.AbError, match="does not compile"):
        ab.compiled(tmp_path)


def test_pairs_alternate_which_side_goes_first_and_only_the_old_side_gets_the_path(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PYTHONPATH", "/inherited")
    calls: list[str] = []

    def runner(argv: list[str], env: Mapping[str, str]) -> dict[str, Any]:
        assert argv == ["transform", "--events", "10"]
        side = "old" if env["PYTHONPATH"].split(os.pathsep)[0] == str(tmp_path) else "new"
        assert env["PYTHONPATH"].endswith("/inherited")
        calls.append(side)
        return {"side": side, "n": len(calls)}

    old, new = ab.compare(["transform", "--events", "10"], tmp_path, 3, runner=runner)
    assert calls == ["old", "new", "new", "old", "old", "new"]
    assert [r["n"] for r in old] == [1, 4, 5] and [r["n"] for r in new] == [2, 3, 6]


def test_figures_are_compared_by_the_ratio_of_their_medians() -> None:
    old = [{"machine": "x", "us": 10, "ok": True, "parts": {"a": [1.0, 4.0]}}, {"us": 12}, {"us": 11}]
    new = [{"us": 5}, {"us": 7}, {"us": 6}]
    assert ab.default_figures(old + new) == ["us"]  # strings and booleans are not figures
    assert ab.figure(old[0], "parts.a.1") == 4.0
    assert ab.figure(old[0], "parts.b") is None
    assert ab.summary(old, new, ["us"]) == [["us", "10 / 12 / 11", "5 / 7 / 6", "0.545"]]
    with pytest.raises(ab.AbError, match=r"'ev_s' is missing.*the runs have: us"):
        ab.summary(old, new, ["ev_s"])


def test_the_command_needs_a_benchmark_after_the_separator(capsys: pytest.CaptureFixture[str]) -> None:
    assert ab.main(["--against", "HEAD"]) == 2
    assert ab.main(["--against", "HEAD", "--"]) == 2
    assert ab.main(["--against", "HEAD", "--pairs", "0", "--", "transform"]) == 2
    assert "--pairs must be at least 1, not 0" in capsys.readouterr().err


def test_both_sides_find_this_checkouts_state_and_jvm_parts(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The old side's library lives outside the checkout: it is told where the checkout keeps them."""
    root = Path(__file__).resolve().parents[3]
    monkeypatch.delenv("WIDEHOUSE_STATE_DIR", raising=False)
    monkeypatch.delenv("WIDEHOUSE_VENDOR_DIR", raising=False)
    monkeypatch.setenv("WIDEHOUSE_SCHEMAS_DIR", "/elsewhere/schemas")
    envs: list[Mapping[str, str]] = []

    def runner(argv: list[str], env: Mapping[str, str]) -> dict[str, Any]:
        envs.append(env)
        return {}

    ab.compare(["transform"], tmp_path, 1, runner=runner)
    for env in envs:
        assert env["WIDEHOUSE_STATE_DIR"] == str(root / ".state")
        assert env["WIDEHOUSE_VENDOR_DIR"] == str(root / ".vendor")
        assert env["WIDEHOUSE_SCHEMAS_DIR"] == "/elsewhere/schemas"  # what the caller set stays

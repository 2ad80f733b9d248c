"""Each driver process's scratch (widehouse.spark.scratch): kept while its process lives, removed by
the next driver once it is gone, however it ended."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from widehouse.spark import scratch

HOLDER = """
import sys
from pathlib import Path
from widehouse.spark.scratch import process_scratch
directory = process_scratch(Path(sys.argv[1]))
(directory / "block").write_bytes(b"x" * 1024)
print(directory, flush=True)
sys.stdin.read()  # lives until the test closes its stdin or kills it
"""


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This test's process scratch only; its locks released after."""
    held: dict[Path, tuple[Path, int]] = {}
    monkeypatch.setattr(scratch, "_HELD", held)
    yield
    for _, fd in held.values():
        os.close(fd)


def _holder(root: Path) -> tuple[subprocess.Popen[str], Path]:
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(root)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    return process, Path(process.stdout.readline().strip())


def test_a_process_gets_one_private_directory_beside_its_lock(tmp_path: Path) -> None:
    root = tmp_path / "spark" / "tmp"
    first = scratch.process_scratch(root)
    assert first == scratch.process_scratch(root)
    assert first.parent == root and first.name.startswith(f"driver-{os.getpid()}-")
    assert first.stat().st_mode & 0o777 == 0o700
    assert sorted(p.name for p in root.iterdir()) == [first.name, f"{first.name}.lock"]


def test_a_killed_process_scratch_goes_and_a_living_one_stays(tmp_path: Path) -> None:
    root = tmp_path / "tmp"
    killed, killed_dir = _holder(root)
    living, living_dir = _holder(root)
    try:
        assert (killed_dir / "block").is_file() and (living_dir / "block").is_file()
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait(timeout=30)
        mine = scratch.process_scratch(root)  # what a driver starting now does first
        assert not killed_dir.exists() and not Path(f"{killed_dir}.lock").exists()
        assert (living_dir / "block").is_file()
        assert scratch.sweep(root) == []  # the living one's and this process's own stay
        assert mine.is_dir()
    finally:
        assert living.stdin is not None
        living.stdin.close()  # it exits cleanly: its lock goes with it, its directory stays
        living.wait(timeout=30)
    assert scratch.sweep(root) == [living_dir]
    assert not living_dir.exists()
    assert sorted(p.name for p in root.iterdir()) == [mine.name, f"{mine.name}.lock"]


def test_the_sweep_leaves_what_it_did_not_make_and_clears_a_half_made_lock(tmp_path: Path) -> None:
    root = tmp_path
    (root / "spark-0a1b").mkdir()  # a Spark directory of a driver from before scratch dirs
    (root / "driver-notes.txt").write_text("someone else's")
    (root / ".driver-12-ab.lock.partial").write_text("")  # a process killed as it started
    assert scratch.sweep(root) == []
    assert sorted(p.name for p in root.iterdir()) == ["driver-notes.txt", "spark-0a1b"]


def test_a_scratch_removed_under_its_process_is_made_again(tmp_path: Path) -> None:
    """A state dir deleted while the process lives (a test's): the next session gets a new one."""
    first = scratch.process_scratch(tmp_path / "a")
    for path in sorted(first.parent.iterdir()):
        if path.is_dir():
            path.rmdir()
        else:
            path.unlink()
    again = scratch.process_scratch(tmp_path / "a")
    assert again.is_dir() and again != first
    assert len(scratch._HELD) == 1

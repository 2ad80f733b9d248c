"""A test session owns what it starts; a new session reaps what a dead one left (issue 30, part 2).

Real small processes, no services: a "session" is a Python process that claims a mark and starts a
port-holding child the way services start (:class:`ManagedProcess`, its own process group), then is
SIGKILLed like a session at a CI time-out. Every fake session writes its records under this test's
own temp dir (``TMPDIR``), so the pid sets the tests read are theirs.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import ROOT
from widehouse.services import ownership
from widehouse.services.process import ManagedProcess, ProcessSpec, pid_alive, port_is_free, start_time

SESSION = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from widehouse.services import ownership
    from widehouse.services.process import ManagedProcess, ProcessSpec, port_is_open

    work, port, how = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    mark = ownership.claim()
    holder = (
        "import socket, time; s = socket.socket(); "
        f"s.bind(('127.0.0.1', {port})); s.listen(1); time.sleep(600)"
    )
    prefix = {"marked": (), "scrubbed": ("env", "-i"), "protected": ()}[how]
    option = ("-Xwidehouse.service=holder@" + str(work / "protected-state"),) if how == "protected" else ()
    spec = ProcessSpec(
        name="holder", argv=(*prefix, sys.executable, *option, "-c", holder), cwd=work,
        log_file=work / "holder.log", pid_file=work / "holder.pid", marker="unused",
    )
    pid = ManagedProcess(spec).start()
    deadline = time.monotonic() + 20
    while not port_is_open(port) and time.monotonic() < deadline:
        time.sleep(0.02)
    print(json.dumps({"mark": str(mark), "holder": pid}), flush=True)
    time.sleep(600)
    """
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def unmarked_env(tmp: Path) -> dict[str, str]:
    """This process's environment without this session's mark, records under ``tmp``."""
    env = {k: v for k, v in os.environ.items() if k != ownership.SESSION_VARIABLE}
    return {**env, "TMPDIR": str(tmp), "PYTHONPATH": f"{ROOT / 'spark'}{os.pathsep}{ROOT}"}


@dataclass
class FakeSession:
    process: subprocess.Popen[str]
    mark: str
    holder: int
    holder_start: str | None
    port: int

    def die(self) -> None:
        """SIGKILL the session (nothing of it runs its clean-up), as a CI time-out does."""
        self.process.kill()
        self.process.wait(10)


@pytest.fixture
def sessions(tmp_path: Path) -> Iterator[list[FakeSession]]:
    """Fake sessions started by a test; whatever of them is left is killed at its end."""
    made: list[FakeSession] = []
    yield made
    for session in made:
        if pid_alive(session.holder) and start_time(session.holder) == session.holder_start:
            os.killpg(session.holder, signal.SIGKILL)  # its own group (start_new_session)
        if session.process.poll() is None:
            session.process.kill()
            session.process.wait(10)


def start_session(tmp_path: Path, how: str, made: list[FakeSession]) -> FakeSession:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-c", SESSION, str(tmp_path), str(port), how],
        env=unmarked_env(tmp_path),
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line, f"fake session exited with {process.wait(10)}"
    info = json.loads(line)
    session = FakeSession(process, info["mark"], info["holder"], start_time(info["holder"]), port)
    made.append(session)
    assert not port_is_free(port), "the holder should listen before the session reports"
    return session


def root_of(tmp_path: Path) -> Path:
    return tmp_path / f"widehouse-test-sessions-{os.getuid()}"


def gone(pid: int, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not pid_alive(pid)


def test_a_dead_sessions_service_is_reaped_and_its_port_freed_others_are_left_alone(
    tmp_path: Path, sessions: list[FakeSession]
) -> None:
    dead = start_session(tmp_path, "marked", sessions)
    live = start_session(tmp_path, "marked", sessions)
    unmarked = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"],
        env={k: v for k, v in os.environ.items() if k != ownership.SESSION_VARIABLE},
        start_new_session=True,
    )
    try:
        dead.die()
        time.sleep(0.3)
        assert pid_alive(dead.holder) and not port_is_free(dead.port), "the dead session's child holds on"

        reaped = ownership.reap(root=root_of(tmp_path), timeout=5)

        assert dead.holder in {r.pid for r in reaped}
        assert gone(dead.holder)
        assert port_is_free(dead.port)
        # a live session's process, the live session itself and an unmarked process: untouched
        assert pid_alive(live.holder) and not port_is_free(live.port)
        assert live.process.poll() is None
        assert pid_alive(unmarked.pid)
        assert not {live.holder, live.process.pid, unmarked.pid, os.getpid()} & {r.pid for r in reaped}
        # the dead session's records are forgotten, the live one's kept
        assert not (root_of(tmp_path) / dead.mark).exists()
        assert (root_of(tmp_path) / live.mark / "pids").read_text().split()[0] == str(live.holder)
    finally:
        unmarked.kill()
        unmarked.wait(10)


def test_a_process_that_dropped_the_mark_is_found_by_the_recorded_pid_set(
    tmp_path: Path, sessions: list[FakeSession]
) -> None:
    dead = start_session(tmp_path, "scrubbed", sessions)
    environ = Path(f"/proc/{dead.holder}/environ").read_bytes()
    assert ownership.SESSION_VARIABLE.encode() not in environ  # env -i: only the pid set knows it
    dead.die()

    reaped = ownership.reap(root=root_of(tmp_path), timeout=5)

    assert dead.holder in {r.pid for r in reaped}
    assert gone(dead.holder)
    assert port_is_free(dead.port)


def test_a_protected_state_dirs_service_is_never_reaped(tmp_path: Path, sessions: list[FakeSession]) -> None:
    dead = start_session(tmp_path, "protected", sessions)
    dead.die()

    reaped = ownership.reap(root=root_of(tmp_path), protected=[tmp_path / "protected-state"], timeout=5)

    assert dead.holder not in {r.pid for r in reaped}
    time.sleep(0.2)
    assert pid_alive(dead.holder) and not port_is_free(dead.port)


def test_a_new_pytest_session_reaps_a_dead_sessions_leftover_when_it_starts(
    tmp_path: Path, sessions: list[FakeSession]
) -> None:
    """The reaper is wired into the real session start (tests/conftest.py's pytest_configure)."""
    dead = start_session(tmp_path, "marked", sessions)
    dead.die()
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--co", "tests/unit/test_ticker.py"],
        cwd=ROOT,
        env=unmarked_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert f"stopped pid {dead.holder} of dead test session {dead.mark}" in out.stdout + out.stderr
    assert gone(dead.holder)
    assert port_is_free(dead.port)


def test_this_session_is_marked_and_owned_by_this_pytest_process() -> None:
    mark = ownership.current()
    assert mark is not None
    assert mark.owner_pid == os.getpid() and mark.owner_alive()


def test_claim_joins_a_live_inherited_session_and_replaces_a_dead_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ownership, "records_root", lambda: tmp_path)
    parent = os.getppid()
    live = ownership.Mark(parent, str(start_time(parent)), "abc123")
    monkeypatch.setenv(ownership.SESSION_VARIABLE, str(live))
    assert ownership.claim() == live  # a nested pytest joins its owner's session

    dead = ownership.Mark(parent, "1", "abc123")  # the pid lives on, its start time differs: recycled
    monkeypatch.setenv(ownership.SESSION_VARIABLE, str(dead))
    mine = ownership.claim()
    assert mine.owner_pid == os.getpid() and mine != dead
    assert os.environ[ownership.SESSION_VARIABLE] == str(mine)


@pytest.mark.parametrize("text", ["", "12", "a.b.c", "12.34.", "12.34.x y", "12.34.abc.def", "-1.2.ab"])
def test_what_is_not_a_mark_is_ignored(text: str) -> None:
    assert ownership.Mark.parse(text) is None


def test_a_process_this_session_starts_carries_its_mark_and_is_in_its_pid_set(tmp_path: Path) -> None:
    mark = ownership.current()
    assert mark is not None
    spec = ProcessSpec(
        name="sleeper",
        argv=(sys.executable, "-c", "import time; time.sleep(600)"),
        cwd=tmp_path,
        log_file=tmp_path / "sleeper.log",
        pid_file=tmp_path / "sleeper.pid",
        marker="unused",
    )
    process = ManagedProcess(spec)
    pid = process.start()
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        assert f"{ownership.SESSION_VARIABLE}={mark}".encode() in environ
        recorded = (mark.record_dir() / "pids").read_text().splitlines()
        assert f"{pid} {start_time(pid)} sleeper" in recorded
        assert pid not in {leftover.pid for leftover in ownership.leftovers()}  # its owner lives
    finally:
        process.stop()

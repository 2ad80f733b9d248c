"""A test session owns what it starts; a new session reaps what a dead one left.

When a test session dies (SIGKILL, a CI time-out) the services, Airflow components and detached
stream apps it started keep running and hold their ports, and the next session meets busy ports.
So every test session carries a mark, and a new session stops what a *dead* session left behind
before it starts anything:

- **The mark.** :func:`claim` exports ``WIDEHOUSE_TEST_SESSION=<owner pid>.<owner start time>.<token>``
  into the session's (pytest's) environment. Every process the session starts inherits it, however
  far down (``widehouse services up`` in a subprocess, the JVMs of a service, Airflow's scheduler and
  its tasks, the stream apps a supervisor task detaches), and keeps it in ``/proc/<pid>/environ``.
  The owner's pid *and* start time make the mark: a recycled pid never passes for a live owner.
- **The pid set.** :meth:`widehouse.services.process.ManagedProcess.start` also records the pid (with
  its start time) of every background process it starts under a mark in the session's record dir,
  ``<tmp>/widehouse-test-sessions-<uid>/<mark>/pids``: it finds a process that replaced its
  environment (``env -i``) too.
- **The reaper.** :func:`reap` finds the processes of this user that carry a mark whose owner is gone
  (found by pid, from ``/proc``), and the recorded pids of such sessions that still run with the
  recorded start time, and stops them as process groups: TERM, then KILL. A group is signalled
  whole only when its leader is such a leftover or every live member is one; otherwise only the
  leftovers themselves. Never touched: a process without a mark (a developer's own ``widehouse
  services up``, the shared services of a box), a live session's processes, this process and its
  ancestors, another user's processes, and any process whose service marker names a protected
  state dir (the test session passes the environment's own state dir).

The mark is a process label read from ``/proc``, not configuration, so it is read here and not by
the settings package (like ``-Dwidehouse.service=`` markers on command lines).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from widehouse.services.pids import cmdline as _cmdline
from widehouse.services.pids import group_members, pid_alive, signal_group, start_time, stat_fields

SESSION_VARIABLE = "WIDEHOUSE_TEST_SESSION"
"""The environment variable that marks a process as owned by a test session."""

PIDS_FILE = "pids"


def records_root() -> Path:
    """Where test sessions record their pids: one private dir per user under the temp dir."""
    return Path(tempfile.gettempdir()) / f"widehouse-test-sessions-{os.getuid()}"


@dataclass(frozen=True)
class Mark:
    """A test session's mark: the owning process (pid and start time) and a random token."""

    owner_pid: int
    owner_start: str
    token: str

    def __str__(self) -> str:
        return f"{self.owner_pid}.{self.owner_start}.{self.token}"

    @classmethod
    def parse(cls, text: str) -> Mark | None:
        """The mark ``text`` spells, or None when it is not one (never raises)."""
        parts = text.strip().split(".")
        if len(parts) != 3 or not parts[0].isdigit() or not parts[1].isdigit() or not parts[2].isalnum():
            return None
        return cls(int(parts[0]), parts[1], parts[2])

    def owner_alive(self) -> bool:
        return pid_alive(self.owner_pid) and start_time(self.owner_pid) == self.owner_start

    def record_dir(self, root: Path | None = None) -> Path:
        return (root or records_root()) / str(self)


def current() -> Mark | None:
    """The mark this process runs under (inherited or claimed), if any."""
    return Mark.parse(os.environ.get(SESSION_VARIABLE, ""))


def claim(root: Path | None = None) -> Mark:
    """Make this process a test session's owner, or join the live session whose mark it inherited
    (a nested pytest): exports the mark into ``os.environ`` and creates its record dir."""
    inherited = current()
    if inherited is not None and inherited.owner_alive():
        return inherited
    started = start_time(os.getpid())
    if started is None:  # no /proc: nothing can be marked or reaped on this platform
        raise OSError(f"cannot read the start time of pid {os.getpid()} from /proc")
    mark = Mark(os.getpid(), started, secrets.token_hex(4))
    _private(mark.record_dir(root))
    os.environ[SESSION_VARIABLE] = str(mark)
    return mark


def release(mark: Mark, root: Path | None = None) -> None:
    """Forget ``mark``'s records at the end of its session (what it started was stopped by then)."""
    if mark.owner_pid != os.getpid():
        return  # a joined session: its owner releases it
    folder = mark.record_dir(root)
    (folder / PIDS_FILE).unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        folder.rmdir()


def record(pid: int, name: str, root: Path | None = None) -> None:
    """Record ``pid`` (a background process just started) in the pid set of the session this process
    runs under; nothing outside a test session."""
    mark = current()
    if mark is None:
        return
    started = start_time(pid)
    if started is None:
        return  # already gone: nothing to reap later
    folder = _private(mark.record_dir(root))
    with (folder / PIDS_FILE).open("a") as handle:
        handle.write(f"{pid} {started} {name}\n")


@dataclass(frozen=True)
class Leftover:
    pid: int
    started: str | None
    """Start time of the process when found: a pid recycled before the signal is not signalled."""
    mark: str
    command: str


def leftovers(root: Path | None = None, protected: Iterable[Path] = ()) -> list[Leftover]:
    """Processes of dead test sessions (see the module docstring for what is never one)."""
    guarded = {_resolved(p) for p in protected}
    spared = _self_and_ancestors()
    found: dict[int, Leftover] = {}
    for pid in _pids():
        if pid in spared:
            continue
        mark = _mark_of(pid)
        if mark is None or mark.owner_alive():
            continue
        command = _cmdline(pid)
        if not _guarded(command, guarded) and pid_alive(pid):
            found[pid] = Leftover(pid, start_time(pid), str(mark), command)
    folder = root or records_root()
    with contextlib.suppress(OSError):
        if folder.stat().st_uid != os.getuid():
            return sorted(found.values(), key=lambda leftover: leftover.pid)  # not ours to believe
        for record_dir in folder.iterdir():
            mark = Mark.parse(record_dir.name)
            if mark is None or mark.owner_alive():
                continue
            for pid, started in _recorded(record_dir / PIDS_FILE):
                if pid in found or pid in spared or start_time(pid) != started or not pid_alive(pid):
                    continue
                command = _cmdline(pid)
                if not _guarded(command, guarded):
                    found[pid] = Leftover(pid, started, str(mark), command)
    return sorted(found.values(), key=lambda leftover: leftover.pid)


def reap(root: Path | None = None, protected: Iterable[Path] = (), timeout: float = 10.0) -> list[Leftover]:
    """Stop every leftover of a dead test session (TERM, KILL after ``timeout``), as process groups
    where the whole group is leftovers; forget the dead sessions' records. Returns what was found."""
    protected = list(protected)
    found = leftovers(root, protected)
    doomed = {leftover.pid for leftover in found}
    spared = _self_and_ancestors()
    guarded = {_resolved(p) for p in protected}
    started = {leftover.pid: leftover.started for leftover in found}
    groups: set[int] = set()
    singles: set[int] = set()
    for pid in doomed:
        pgid = _pgid(pid)
        if pgid is not None and _whole_group(pgid, doomed, spared, guarded):
            groups.add(pgid)
        else:
            singles.add(pid)
    _signal(groups, singles, started, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while _any_alive(doomed, groups) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _any_alive(doomed, groups):
        _signal(groups, singles, started, signal.SIGKILL)
        deadline = time.monotonic() + 5.0
        while _any_alive(doomed, groups) and time.monotonic() < deadline:
            time.sleep(0.05)
    _forget_dead(root or records_root())
    return found


# -- /proc -------------------------------------------------------------------------------------
def _pids() -> list[int]:
    return [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]


def _mark_of(pid: int) -> Mark | None:
    """The session mark in ``pid``'s environment; None when absent or not readable (another user's)."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    prefix = SESSION_VARIABLE.encode() + b"="
    for entry in raw.split(b"\0"):
        if entry.startswith(prefix):
            return Mark.parse(entry[len(prefix) :].decode("ascii", errors="replace"))
    return None


def _pgid(pid: int) -> int | None:
    fields = stat_fields(pid)
    return int(fields[2]) if fields else None


def _whole_group(pgid: int, doomed: set[int], spared: set[int], guarded: set[str]) -> bool:
    """Whether process group ``pgid`` may be signalled whole: its leader or every live member is a
    leftover, and no member is this process, an ancestor, a protected service or carries a live
    session's mark."""
    if pgid == os.getpgrp():
        return False
    members = group_members(pgid)
    if members & spared:
        return False
    for member in members - doomed:
        mark = _mark_of(member)
        if (mark is not None and mark.owner_alive()) or _guarded(_cmdline(member), guarded):
            return False
    return pgid in doomed or members <= doomed


def _self_and_ancestors() -> set[int]:
    spared = {os.getpid()}
    pid = os.getppid()
    while pid > 1 and pid not in spared:
        spared.add(pid)
        fields = stat_fields(pid)
        if not fields:
            break
        pid = int(fields[1])
    return spared


def _guarded(command: str, guarded: set[str]) -> bool:
    """Whether ``command`` carries a service marker (``-Dwidehouse.service=<name>@<state dir>``) of a
    protected state dir."""
    return any(
        "widehouse.service=" in word and "@" in word and _resolved(Path(word.split("@", 1)[1])) in guarded
        for word in command.split()
    )


def _resolved(path: Path) -> str:
    try:
        return str(path.resolve())
    except OSError:
        return str(path)


def _recorded(pids_file: Path) -> list[tuple[int, str]]:
    try:
        lines = pids_file.read_text().splitlines()
    except OSError:
        return []
    result: list[tuple[int, str]] = []
    for line in lines:
        words = line.split()
        if len(words) >= 2 and words[0].isdigit():
            result.append((int(words[0]), words[1]))
    return result


def _signal(groups: set[int], singles: set[int], started: dict[int, str | None], sig: signal.Signals) -> None:
    for pgid in groups:
        signal_group(pgid, sig)
    for pid in singles:
        if start_time(pid) != started.get(pid):
            continue  # gone, or the pid now belongs to another program
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _any_alive(pids: set[int], groups: set[int]) -> bool:
    return any(pid_alive(pid) for pid in pids) or any(group_members(pgid) for pgid in groups)


def _forget_dead(root: Path) -> None:
    with contextlib.suppress(OSError):
        for record_dir in root.iterdir():
            mark = Mark.parse(record_dir.name)
            if mark is not None and not mark.owner_alive():
                (record_dir / PIDS_FILE).unlink(missing_ok=True)
                with contextlib.suppress(OSError):
                    record_dir.rmdir()


def _private(folder: Path) -> Path:
    from widehouse import private

    private.private_dir(folder.parent, tighten=True)
    return private.private_dir(folder)

"""A background process with a pid file, a log file and a health check.

This is the mechanism under every local service (Pulsar standalone, HBase, HBase Thrift). It knows
nothing about those systems: a :class:`ProcessSpec` says what to run and which ports it will own,
and a health probe says when it is ready.

Processes are started in their own session (process group) so that stopping one also stops every
child it spawned. Each command line carries a marker (``-Dwidehouse.service=<name>`` plus the state
directory) so that a pid file pointing at a recycled pid is recognised as stale, and so that
``down`` finds a service even when its pid file was lost. Under a test session every process also
inherits the session's mark and is recorded in its pid set (:mod:`widehouse.services.ownership`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from widehouse.errors import PortInUseError, ServiceError
from widehouse.services import ownership
from widehouse.services.pids import cmdline as _cmdline
from widehouse.services.pids import group_members, pid_alive, signal_group, start_time

log = logging.getLogger("widehouse.services")

HealthProbe = Callable[[], str | None]
"""Returns None when healthy, else a short reason why not (yet)."""

LOG_ROTATE_BYTES = 64 * 1024 * 1024
"""A captured log at least this large is rotated when its process next starts."""
LOG_GENERATIONS = 3
"""Rotated logs kept beside the live one (``<name>.log.1`` newest ... ``.3`` oldest)."""


@dataclass(frozen=True)
class PortSpec:
    """A port a service listens on, and the setting that chooses it."""

    label: str
    port: int
    variable: str
    host: str = "127.0.0.1"


@dataclass(frozen=True)
class ProcessSpec:
    name: str
    argv: tuple[str, ...]
    cwd: Path
    log_file: Path
    pid_file: Path
    marker: str
    """A string unique to this service and state dir that appears in the (final) command line of the
    service's process; used to find processes whose pid file was lost."""
    env: Mapping[str, str] = field(default_factory=dict)
    ports: tuple[PortSpec, ...] = ()


def tail(path: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of a log file ('' if it does not exist)."""
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 64 * 1024))
            data = handle.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""
    return "\n".join(data.splitlines()[-lines:])


def rotate_log(path: Path, max_bytes: int | None = None, keep: int | None = None) -> bool:
    """Move ``path`` to ``path.1`` (and each older generation one further, the oldest dropped) when
    it holds ``max_bytes`` (default :data:`LOG_ROTATE_BYTES`) or more, keeping ``keep`` (default
    :data:`LOG_GENERATIONS`) rotated files. True if it was rotated. Called by whatever is about to
    append to a captured log, before it writes.

    A service's console goes straight from its process to this file, so nothing can rotate it
    while the process runs; it is rotated when the process next starts. That bounds the logs of a
    service restarted now and then to ``keep + 1`` files of about ``max_bytes`` each, plus what the
    running process writes."""
    max_bytes = LOG_ROTATE_BYTES if max_bytes is None else max_bytes
    keep = LOG_GENERATIONS if keep is None else keep
    if keep < 1:
        raise ValueError(f"keep must be at least 1, got {keep}")
    try:
        if path.stat().st_size < max_bytes:
            return False
    except FileNotFoundError:
        return False

    def generation(number: int) -> Path:
        return path.with_name(f"{path.name}.{number}")

    try:
        generation(keep).unlink(missing_ok=True)
        for number in range(keep - 1, 0, -1):
            if generation(number).exists():
                generation(number).replace(generation(number + 1))
        path.replace(generation(1))
    except OSError as exc:  # a log that cannot be moved must not stop a service from starting
        log.warning("could not rotate %s (appending to it instead): %s", path, exc)
        return False
    return True


def log4j2_console(levels: Mapping[str, str]) -> str:
    """A log4j2.properties for a JVM service: INFO and up to stdout (the service's log file), with
    ``levels`` (logger name -> level) for the chattier libraries."""
    lines = [
        "status = warn",
        "appender.console.type = Console",
        "appender.console.name = console",
        "appender.console.target = SYSTEM_OUT",
        "appender.console.layout.type = PatternLayout",
        "appender.console.layout.pattern = %d{ISO8601} %-5p [%t] %c{2}: %m%n",
        "rootLogger = INFO, console",
    ]
    for number, (logger, level) in enumerate(levels.items()):
        lines += [f"logger.l{number}.name = {logger}", f"logger.l{number}.level = {level}"]
    return "\n".join(lines) + "\n"


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def port_is_open(port: int, host: str = "127.0.0.1", timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _group_alive(pgid: int) -> bool:
    """True while the leader or any member of process group ``pgid`` is alive (not a zombie)."""
    return pid_alive(pgid) or bool(group_members(pgid))


def find_marked_pids(marker: str) -> list[int]:
    """Pids of live processes whose command line contains ``marker`` (Linux /proc)."""
    pids: list[int] = []
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        if pid != me and marker in _cmdline(pid) and pid_alive(pid):
            pids.append(pid)
    return sorted(pids)


def _listening_inode(port: int) -> set[str]:
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as handle:
            next(handle, None)
            for line in handle:
                cols = line.split()
                local, state, inode = cols[1], cols[3], cols[9]
                if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                    inodes.add(inode)
    return inodes


def who_listens(port: int) -> str | None:
    """Best effort: 'pid N (command)' of the process listening on ``port``, if visible to us."""
    inodes = _listening_inode(port)
    if not inodes:
        return None
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in (entry / "fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:[") and target[8:-1] in inodes:
                    cmd = _cmdline(int(entry.name))[:120]
                    return f"pid {entry.name} ({cmd})"
    return None


class ManagedProcess:
    """Start, find, stop and inspect one background process described by a :class:`ProcessSpec`."""

    def __init__(self, spec: ProcessSpec) -> None:
        self.spec = spec
        self._popen: subprocess.Popen[bytes] | None = None

    # -- discovery ---------------------------------------------------------------------------
    def pid(self) -> int | None:
        """The live pid of this service, or None. A stale pid file is removed.

        The pid file holds the pid and the process start time, so a pid recycled by another program
        after a crash is not mistaken for the service.
        """
        pid_file = self.spec.pid_file
        try:
            fields = pid_file.read_text().split()
        except FileNotFoundError:
            return None
        try:
            pid, started = int(fields[0]), (fields[1] if len(fields) > 1 else None)
        except (ValueError, IndexError):
            pid_file.unlink(missing_ok=True)
            return None
        if pid_alive(pid) and started is not None and start_time(pid) == started:
            return pid
        pid_file.unlink(missing_ok=True)  # dead, or the pid now belongs to another program
        return None

    def stray_pids(self) -> list[int]:
        """Processes of this service that run without (or beside) a valid pid file."""
        known = self.pid()
        return [p for p in find_marked_pids(self.spec.marker) if p != known]

    # -- lifecycle ---------------------------------------------------------------------------
    def check_ports_free(self) -> None:
        for port in self.spec.ports:
            if not port_is_free(port.port, port.host):
                holder = who_listens(port.port)
                held = f" (held by {holder})" if holder else ""
                raise PortInUseError(
                    f"cannot start {self.spec.name}: its {port.label} port {port.host}:{port.port} "
                    f"is already in use{held}. Stop that process or choose another port with "
                    f"{port.variable}=<port>."
                )

    def start(self) -> int:
        """Launch the process in the background and record its pid. Ports must be free."""
        self.check_ports_free()
        spec = self.spec
        spec.log_file.parent.mkdir(parents=True, exist_ok=True)
        spec.pid_file.parent.mkdir(parents=True, exist_ok=True)
        spec.cwd.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **spec.env}
        rotate_log(spec.log_file)
        with spec.log_file.open("ab") as log:
            log.write(f"\n==== widehouse: starting {spec.name} at {time.strftime('%F %T')} ====\n".encode())
            log.flush()
            try:
                self._popen = subprocess.Popen(
                    list(spec.argv),
                    cwd=spec.cwd,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            except OSError as exc:
                raise ServiceError(f"cannot launch {spec.name} ({spec.argv[0]}): {exc}") from exc
        spec.pid_file.write_text(f"{self._popen.pid} {start_time(self._popen.pid)}\n")
        ownership.record(self._popen.pid, spec.name)  # a test session's: reaped if the session dies
        return self._popen.pid

    def exit_code(self) -> int | None:
        """Exit code if this object started the process and it has exited, else None."""
        if self._popen is None:
            return None
        return self._popen.poll()

    def wait_healthy(self, probe: HealthProbe, timeout: float, interval: float = 0.5) -> None:
        """Wait until ``probe`` reports healthy; on death or timeout stop it and raise ServiceError."""
        deadline = time.monotonic() + timeout
        reason: str | None = "not checked yet"
        while True:
            code = self.exit_code()
            if code is not None or self.pid() is None:
                how = f"exited with code {code}" if code is not None else "is no longer running"
                self.stop()
                raise ServiceError(
                    f"{self.spec.name} {how} while starting. Last lines of {self.spec.log_file}:\n"
                    f"{tail(self.spec.log_file)}"
                )
            reason = _safe_probe(probe)
            if reason is None:
                return
            if time.monotonic() >= deadline:
                self.stop()
                raise ServiceError(
                    f"{self.spec.name} did not become healthy within {timeout:.0f}s ({reason}). "
                    f"Last lines of {self.spec.log_file}:\n{tail(self.spec.log_file)}"
                )
            time.sleep(interval)

    def stop(self, timeout: float = 30.0) -> bool:
        """Stop the process group (TERM, then KILL after ``timeout``). True if anything was stopped.

        Returns only when no process of the group is left.
        """
        groups = [p for p in [self.pid(), *self.stray_pids()] if p is not None]
        for pgid in groups:
            signal_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while any(_group_alive(g) for g in groups) and time.monotonic() < deadline:
            self._reap()
            time.sleep(0.2)
        for pgid in groups:
            if _group_alive(pgid):
                signal_group(pgid, signal.SIGKILL)
        while any(_group_alive(g) for g in groups):
            self._reap()
            time.sleep(0.1)
        self._reap()
        self.spec.pid_file.unlink(missing_ok=True)
        return bool(groups)

    def _reap(self) -> None:
        if self._popen is not None:
            self._popen.poll()


def _safe_probe(probe: HealthProbe) -> str | None:
    try:
        return probe()
    except Exception as exc:  # a probe failure is a "not healthy yet", never a crash of `up`
        return f"{type(exc).__name__}: {exc}"

"""Facts about processes by pid, from ``/proc`` (Linux): what both starting services
(:mod:`widehouse.services.process`) and reaping a dead test session's leftovers
(:mod:`widehouse.services.ownership`) need."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path


def cmdline(pid: int) -> str:
    """The command line of ``pid`` (arguments joined by spaces), empty when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode("utf-8", errors="replace")


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie (our own exited child not yet reaped) is not alive for our purposes
    fields = stat_fields(pid)
    return fields is None or fields[0] != "Z"


def start_time(pid: int) -> str | None:
    """The process start time in clock ticks since boot (field 22 of /proc/<pid>/stat)."""
    fields = stat_fields(pid)
    return fields[19] if fields else None


def stat_fields(pid: int) -> list[str] | None:
    """Fields of ``/proc/<pid>/stat`` after the command name (state, ppid, pgrp, ...); None when gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
    except OSError:
        return None


def group_members(pgid: int) -> set[int]:
    """Live (non-zombie) members of process group ``pgid``."""
    members: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = stat_fields(int(entry.name))
        if fields and fields[2] == str(pgid) and fields[0] != "Z":
            members.add(int(entry.name))
    return members


def signal_group(pid: int, sig: signal.Signals) -> None:
    """Send ``sig`` to the process group ``pid`` leads, and to ``pid`` itself."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)

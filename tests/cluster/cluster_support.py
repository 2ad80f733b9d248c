"""Helpers of the cluster tests: the master's view of the apps, and their executor JVMs."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from widehouse.services.spark_cluster import master_state
from widehouse.settings import LocalServicesSettings


def active_apps(local: LocalServicesSettings) -> dict[str, str]:
    """App id -> app name of the apps running on the local cluster (the master's JSON status)."""
    state = master_state(local)
    assert not isinstance(state, str), state
    apps = state.get("activeapps", [])
    assert isinstance(apps, list)
    return {str(a["id"]): str(a["name"]) for a in apps}


def executor_pids(app_id: str) -> list[int]:
    """Pids of the executor JVMs of ``app_id`` (``CoarseGrainedExecutorBackend ... --app-id <id>``)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [w.decode(errors="replace") for w in argv]
        if "org.apache.spark.executor.CoarseGrainedExecutorBackend" in words and app_id in words:
            pids.append(int(entry.name))
    return sorted(pids)


def wait_for(what: str, check: object, timeout: float = 300.0, interval: float = 0.05) -> None:
    """Poll ``check()`` until it is truthy (``what`` names it in the timeout error)."""
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout:.0f}s")
        time.sleep(interval)


def sigkill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)

"""``widehouse airflow backfill``: ``airflow backfill create`` against the local stack, retried when
its SQLite metadata DB is busy.

The local stack keeps Airflow's metadata in SQLite (WAL mode, Airflow's own setting). A transaction
that read and then writes while the scheduler wrote in between gets ``database is locked`` at once
(SQLite's snapshot rule: no busy wait helps), and ``backfill create`` does exactly that while the
scheduler runs. It creates the backfill and all its runs in one transaction, so a failed attempt
leaves nothing behind and trying again is safe. On Postgres/MySQL (a production metadata DB) there
is nothing to retry; run ``airflow backfill create`` directly.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from widehouse.services.airflow import airflow_environment, component_keys, venv_bin
from widehouse.settings import AirflowSettings

LOCKED = "database is locked"

Runner = Callable[..., "subprocess.CompletedProcess[str]"]


def backfill_create(
    airflow: AirflowSettings,
    args: Sequence[str],
    *,
    attempts: int = 6,
    pause_s: float = 5.0,
    run: Runner = subprocess.run,
    report: Callable[[str], Any] = print,
) -> int:
    """Run ``airflow backfill create ARGS`` with the local stack's environment; try again (up to
    ``attempts`` in all, ``pause_s`` apart) while it fails with ``database is locked``. Returns the
    last exit code; the command's output is passed through."""
    env = {**os.environ, **airflow_environment(airflow, component_keys(airflow), venv_bin())}
    command = [sys.executable, "-m", "airflow", "backfill", "create", *args]
    for attempt in range(1, attempts + 1):
        done = run(command, env=env, capture_output=True, text=True, check=False)
        report(done.stdout + done.stderr)
        if done.returncode == 0 or LOCKED not in done.stdout + done.stderr:
            return done.returncode
        if attempt < attempts:
            report(
                f"widehouse: attempt {attempt}/{attempts}: the metadata DB was busy ({LOCKED}); "
                f"nothing was created, trying again in {pause_s:.0f} s"
            )
            time.sleep(pause_s)
    report(f"widehouse: the metadata DB stayed busy for {attempts} attempts; run the command again")
    return done.returncode

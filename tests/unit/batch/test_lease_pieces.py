"""Pure pieces of the publish lease and protocol: when a holder counts as live, Delta versions."""

from __future__ import annotations

import datetime as dt
import os
import socket
import subprocess
import sys

from widehouse.batch.lease import Holding
from widehouse.batch.publish import publication_version

NOW = dt.datetime(2026, 11, 22, 10, tzinfo=dt.UTC)
LATER = NOW + dt.timedelta(minutes=5)


def _dead_pid() -> int:
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], check=True, capture_output=True, text=True
    )
    return int(done.stdout)


def test_a_holder_is_live_until_released_expired_or_dead_here() -> None:
    here, me = socket.gethostname(), os.getpid()
    assert Holding(1, "r", here, me, LATER, released=False).live(NOW)
    assert not Holding(1, "r", here, me, LATER, released=True).live(NOW)
    assert not Holding(1, "r", here, me, NOW, released=False).live(NOW)  # expiry is exclusive
    assert not Holding(1, "r", here, _dead_pid(), LATER, released=False).live(NOW)
    # a pid on another host cannot be checked from here: only expiry ends it
    assert Holding(1, "r", "elsewhere.example", _dead_pid(), LATER, released=False).live(NOW)


def test_publication_versions_are_epoch_milliseconds() -> None:
    # 2026-11-22T10:00:00.123Z, by hand: 1795341600 s since the epoch
    assert publication_version(NOW + dt.timedelta(milliseconds=123)) == 1_795_341_600_123

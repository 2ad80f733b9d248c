"""How full the disk under a service's data is, reckoned as Pulsar's bookie reckons it.

The bookie (BookKeeper's ``LedgerDirsMonitor``) turns read-only when ``1 - usable / total`` of its
ledger directory's filesystem passes ``diskUsageThreshold`` (``0.99`` in Pulsar's
``standalone.conf``). The broker keeps answering its admin API, but every producer then times out
(``Pulsar error: TimeOut``) with nothing in the error that says why: a CI run on a shared disk at
98 % lost 76 tests that way in 80 minutes. The ``pulsar`` service refuses to start on such a disk
and reports it as unhealthy while it runs, naming the disk, its use and how much to free.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

BOOKIE_DEFAULT_THRESHOLD = 0.95
"""BookKeeper's own default, for a configuration that does not set ``diskUsageThreshold``."""

_THRESHOLD = re.compile(r"^\s*diskUsageThreshold\s*=\s*([0-9.]+)\s*$", re.MULTILINE)
GIB = 1024**3


@dataclass(frozen=True)
class DiskUse:
    """A filesystem's size and the bytes an unprivileged process may still write there (Java's
    ``File.getTotalSpace`` / ``getUsableSpace``)."""

    path: Path
    total: int
    usable: int

    @property
    def fraction(self) -> float:
        return 1.0 - self.usable / self.total if self.total else 0.0


def disk_use(path: Path) -> DiskUse:
    """The use of the filesystem holding ``path`` (or its nearest existing parent)."""
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    stats = os.statvfs(existing)
    return DiskUse(path, total=stats.f_blocks * stats.f_frsize, usable=stats.f_bavail * stats.f_frsize)


def bookie_threshold(conf_text: str) -> float:
    """The ``diskUsageThreshold`` a bookie configuration sets (BookKeeper's default if none)."""
    found = _THRESHOLD.search(conf_text)
    return float(found.group(1)) if found else BOOKIE_DEFAULT_THRESHOLD


def full_disk_reason(use: DiskUse, threshold: float) -> str | None:
    """Why a bookie on this disk takes no writes, with how much to free; None when it does."""
    if use.fraction <= threshold:
        return None
    short = math.ceil((1.0 - threshold) * use.total) - use.usable
    return (
        f"the disk holding {use.path} is {use.fraction:.1%} used ({use.usable / GIB:.1f} GiB free of "
        f"{use.total / GIB:.1f} GiB); Pulsar's bookie takes no writes above {threshold:.0%} "
        f"(diskUsageThreshold), so every producer would time out: free at least {short / GIB:.1f} GiB there"
    )

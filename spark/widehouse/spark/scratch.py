"""Each driver process's scratch directory, removed by a later driver once its process is gone.

A Spark driver keeps its scratch in ``spark-<uuid>`` directories under ``spark.local.dir`` (block
manager files, the Python side's broadcast files and, on a cluster's driver, the unpacked
``spark.archives``: 281 MB of packed environment) and a few things under the JVM's
``java.io.tmpdir`` (the archive's fetched copy, 97 MB; Hive's ``<session>_resources``). Spark
removes them in a JVM shutdown hook, which a killed driver never runs, and until now a cluster
driver's went to ``/tmp``: a box that ran the test suite and the benchmarks for a day held 454 such
directories, 34 GB, until the disk was so full that Pulsar's bookie turned read-only and every
producer timed out (NOTES, issue 28, thirty-eighth round).

So each driver process gets ``<spark.local_dir>/driver-<pid>-<nonce>/`` for both, and holds an
exclusive ``flock`` on ``driver-<pid>-<nonce>.lock`` beside it for as long as it lives (the kernel
drops the lock when the process ends, however it ends, and a recycled pid changes nothing). A
driver about to make its own first removes every sibling whose lock it can take: their processes
are gone. A stream the supervisor restarts after a kill thus finds its predecessor's scratch and
removes it; a test session's state dir is removed whole.

The lock file is made and locked under a temporary name and only then renamed into place, so a
sweeper never finds the lock of a process that has not taken it yet. The lock's descriptor is not
inherited (``O_CLOEXEC``): the driver JVM and the Python workers it starts do not keep a dead
process's scratch alive.
"""

from __future__ import annotations

import fcntl
import logging
import os
import secrets
import shutil
import threading
from pathlib import Path

from widehouse.private import PRIVATE_FILE_MODE, private_dir

log = logging.getLogger("widehouse.spark")

PREFIX = "driver-"
LOCK_SUFFIX = ".lock"

_HELD: dict[Path, tuple[Path, int]] = {}
"""This process's scratch per root: its directory and the locked descriptor of its lock file."""
_GUARD = threading.Lock()


def process_scratch(root: Path) -> Path:
    """This process's scratch directory under ``root`` (0700), made on the first call after the
    scratch of processes that are gone is removed; later calls return the same directory."""
    root = root.absolute()
    with _GUARD:
        held = _HELD.pop(root, None)
        if held is not None:
            if held[0].is_dir():
                _HELD[root] = held
                return held[0]
            os.close(held[1])  # its directory was removed under it (a state dir deleted): a new one
        private_dir(root)
        removed = sweep(root)
        if removed:
            log.info("removed %d dead drivers' scratch under %s", len(removed), root)
        name = f"{PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
        taking = root / f".{name}{LOCK_SUFFIX}.partial"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(taking, flags, PRIVATE_FILE_MODE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.replace(taking, root / f"{name}{LOCK_SUFFIX}")
            directory = private_dir(root / name)
        except BaseException:
            os.close(fd)
            taking.unlink(missing_ok=True)
            raise
        _HELD[root] = (directory, fd)
        return directory


def sweep(root: Path) -> list[Path]:
    """Remove the scratch directories under ``root`` whose process is gone (their lock is free);
    returns them. A directory whose process lives is left alone, and so is anything not made here
    (a lock file left half-made by a process killed as it started is removed too)."""
    removed: list[Path] = []
    locks = [*root.glob(f"{PREFIX}*{LOCK_SUFFIX}"), *root.glob(f".{PREFIX}*{LOCK_SUFFIX}.partial")]
    for lock_path in sorted(locks):
        try:
            fd = os.open(lock_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue  # another sweeper removed it meanwhile, or it is not a plain file
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # its process lives
            # (this process's own lock blocks it too: flock treats each open of a file apart)
            if lock_path.name.startswith(PREFIX):  # not a lock that never got its directory
                directory = lock_path.with_name(lock_path.name.removesuffix(LOCK_SUFFIX))
                shutil.rmtree(directory, ignore_errors=True)
                removed.append(directory)
            lock_path.unlink(missing_ok=True)  # last: a sweeper stopped half-way finds it again
        finally:
            os.close(fd)
    return removed

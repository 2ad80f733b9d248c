"""What a child forked from a warm interpreter shares with it, and how the fork server keeps that to
what a new interpreter would have (:mod:`widehouse.spark.fork_server`).

- Threads: forking beside a thread leaves its locks as they were in the child; only jemalloc's
  background thread is safe (:data:`FORK_SAFE_THREADS`, :func:`thread_count`).
- Random state: a library that draws its per-process state once, as it loads, hands the same state
  to every child. numpy's global state is drawn again after each fork (:data:`RESEEDED`,
  :func:`reseed_after_fork`); a library whose state no one can draw again stops the server forking
  (:data:`FORK_UNSAFE`).
- The collector: the preloaded objects are frozen (:func:`frozen_after`), so the children's
  collections do not write to, and copy, the pages that hold them.
"""

from __future__ import annotations

import gc
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

FORK_UNSAFE = ("_pulsar",)
"""Modules whose state every forked child would share where a new interpreter makes its own, and
that no one can draw again in the child: the Pulsar C++ client names its readers from a random
generator seeded once per process, so two children forked after it loaded create readers of the
same name and the second is refused (``ConsumerBusy``, measured). A server with one of them loaded
declines every request."""
RESEEDED = ("numpy.random",)
"""Modules whose random state a new interpreter draws from the OS as it imports them, which every
fork of the server (and every fork of those, as pyspark's daemon makes its workers) draws again
(:func:`reseed_after_fork`): numpy's global ``RandomState``, which pandas loads. Python's own
``random`` does the same for itself."""
FORK_SAFE_THREADS = frozenset({"jemalloc_bg_thd"})
"""Threads a fork may leave behind: jemalloc's background purging thread, which pyarrow's allocator
starts at import. jemalloc takes its own locks around a fork (``pthread_atfork``) and runs no
background thread in the child; no other code runs on it."""


def thread_count() -> int:
    """This process's threads as the kernel counts them (native ones too), but for those that are
    safe to fork beside (:data:`FORK_SAFE_THREADS`)."""
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return threading.active_count()
    count = 0
    for task in tasks:
        try:
            name = Path(f"/proc/self/task/{task}/comm").read_text().strip()
        except OSError:  # it ended
            continue
        count += name not in FORK_SAFE_THREADS
    return count


def reseed_after_fork() -> None:
    """In a process just forked: the random state of :data:`RESEEDED`'s loaded modules drawn from the
    OS again, as their import in a new interpreter draws it (else every child draws the numbers its
    siblings draw). Registered by the server before it imports anything, so its children run it,
    and so do the processes they fork."""
    for name in RESEEDED:
        module = sys.modules.get(name)
        if module is not None:
            module.seed()  # no argument: from the OS


@contextmanager
def frozen_after() -> Iterator[None]:
    """Import the preloaded modules inside it: no collections while they import; after, their
    garbage is collected once, every object left (the preloaded modules) is moved out of the
    collector's reach (``gc.freeze``), and it collects as usual again, which children inherit.
    Else each child's first collections walk the preloaded objects and write their headers,
    copying every page that holds one (copy-on-write): with pandas, most of the server's memory,
    in every process Spark starts and every worker its daemons fork. What a child allocates is
    collected as in a new interpreter; the frozen objects are the imported modules, which live as
    long in either."""
    gc.disable()
    try:
        yield
    finally:
        gc.collect()
        gc.freeze()
        gc.enable()

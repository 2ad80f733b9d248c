"""Upkeep of the stream's bronze Delta tables: a stream that has run for months appends as fast as
on its first day.

Every batch commits once to each bronze table it writes, and adds a file per partition it touches.
Left alone, both piles grow for as long as the stream runs, and delta-rs pays for them on every
append (measured with delta-rs 1.6 on a local disk, one small append at a time):

- the log: each append lists ``_delta_log`` whole (~12 µs per file). At 3,000 commits an append
  took 40 ms against 5 ms on a new table, and the same table with its old commit files gone took
  5 ms again. Delta's default keeps commit files 30 days: ~17,000 a day per table for two groups on
  the default 10 s trigger.
- the files: each append replays the last checkpoint, which lists every live file. With the log
  kept short, 3,000 live files cost 27 ms per append, 18,000 cost 61 ms.

Two things keep both flat:

- **Retention** (``WIDEHOUSE_DELTA_BRONZE_RETENTION_SECONDS``, ``bronze.retention_properties``): the
  tables' ``delta.logRetentionDuration`` and ``delta.deletedFileRetentionDuration``. delta-rs
  drops older commit files each time it checkpoints (every 100 commits); the vacuum here deletes
  rewritten files that old. Time travel on a bronze table reaches that far back, and a reader may
  take that long. The applications' transactions (the replays' guard) live in the checkpoints and
  are kept.
- **Compaction** (:class:`BronzeUpkeep`, every ``WIDEHOUSE_DELTA_BRONZE_UPKEEP_SECONDS`` in each
  stream app, for the tables it writes): a partition holding at least
  ``WIDEHOUSE_DELTA_BRONZE_COMPACT_FILES`` (16) files smaller than :data:`TARGET_SIZE` is rewritten
  into one by delta-rs, the tables' one writer engine. It changes no row and no application
  transaction, and commits beside any app's appends (an append only adds files; a compaction
  removes only files it read, so two compactions of one partition at once is the only conflict,
  and the loser is logged and skipped).

- **Orphans** (a full vacuum on the first round, then once per :func:`orphan_age_s`): an append
  cut short by a crash (or a failed commit) leaves data files that no commit names. No reader sees
  them, and the per-round vacuum (delta-rs' "lite" mode) deletes only files a commit removed, so
  they would stay for good. A full vacuum lists the whole table and also deletes the files no
  commit names that are older than the retention rounded up to whole hours (delta-rs counts in
  hours), at least an hour: no append is in flight that long, whatever the retention, and a file a
  recent commit removed is still kept for its readers. With full rounds that far apart, an orphan
  is deleted by about twice that age (plus one upkeep interval). A table whose full round failed
  waits for the next full round.

Upkeep never stops a stream: a failure is logged and the next round tries again.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from widehouse.stream.bronze import BronzeTable, local_uri

log = logging.getLogger("widehouse.stream.upkeep")

TARGET_SIZE = 128 * 1024 * 1024
"""Files below this size are small: compaction bins them into files up to this size."""

Filters = list[tuple[str, str, str]]


@dataclass(frozen=True)
class UpkeepResult:
    """What one round did to one table."""

    table: str
    partitions: int = 0
    """Partitions compacted."""
    files_removed: int = 0
    files_added: int = 0
    vacuumed: int = 0
    """Files older than the retention deleted: rewritten ones, and on a full round orphans too."""
    full: bool = False
    """Whether the round's vacuum was a full one (orphans too)."""


def partition_value(value: Any) -> str:
    """A partition value as Delta writes it in a path and as delta-rs' filters take it."""
    if isinstance(value, dt.date):
        return value.isoformat()
    return str(value)


def crowded_partitions(
    actions: pa.Table, partition_by: Sequence[str], min_files: int, target_size: int = TARGET_SIZE
) -> list[Filters]:
    """The filters of the partitions that hold at least ``min_files`` files smaller than
    ``target_size``, in ``actions`` (``DeltaTable.get_add_actions(flatten=True)``); for a table
    without partitions, ``[[]]`` when the whole table does."""
    sizes = actions.column("size_bytes").to_pylist()
    columns = [actions.column(f"partition.{c}").to_pylist() for c in partition_by]
    keys = list(zip(*columns, strict=True)) if columns else [()] * len(sizes)
    small: dict[tuple[Any, ...], int] = {}
    for key, size in zip(keys, sizes, strict=True):
        if size < target_size:
            small[key] = small.get(key, 0) + 1
    return [
        [(c, "=", partition_value(v)) for c, v in zip(partition_by, key, strict=True)]
        for key, count in sorted(small.items(), key=lambda kv: tuple(map(partition_value, kv[0])))
        if count >= min_files and None not in key
    ]


def upkeep_table(
    table: BronzeTable,
    min_files: int,
    storage_options: dict[str, str] | None = None,
    target_size: int = TARGET_SIZE,
    orphans_after_s: int | None = None,
) -> UpkeepResult:
    """Compact ``table``'s partitions that hold at least ``min_files`` small files, then vacuum its
    rewritten files older than its retention; with ``orphans_after_s`` (:func:`orphan_age_s`) a full
    vacuum instead: also files no commit names, older than that. At most ``min_files`` appends' files
    per partition stay uncompacted, and a partition's compacted file is rewritten at most once per
    that many."""
    from deltalake import DeltaTable

    delta = DeltaTable(local_uri(table.path), storage_options=storage_options)
    crowded = crowded_partitions(
        pa.table(delta.get_add_actions(flatten=True)), table.partition_by, min_files, target_size
    )
    removed = added = 0
    for filters in crowded:
        metrics = delta.optimize.compact(partition_filters=filters or None, target_size=target_size)
        removed += int(metrics["numFilesRemoved"])
        added += int(metrics["numFilesAdded"])
    if orphans_after_s is None:
        vacuumed = delta.vacuum(dry_run=False)  # the table's deletedFileRetentionDuration
    else:
        vacuumed = delta.vacuum(retention_hours=orphans_after_s // 3600, dry_run=False, full=True)
    return UpkeepResult(table.name, len(crowded), removed, added, len(vacuumed), orphans_after_s is not None)


def orphan_age_s(retention_s: int) -> int:
    """How old a file no commit names must be for a full vacuum to delete it: the retention rounded
    up to whole hours (delta-rs' unit), at least one hour."""
    return max(1, math.ceil(retention_s / 3600)) * 3600


class BronzeUpkeep:
    """A daemon thread that keeps a stream app's bronze tables small: every ``every`` seconds,
    :func:`upkeep_table` for each table. The first round runs one interval after :meth:`start`.

    ``retention_s``: the tables' retention, for the full vacuums (orphans too): the first round is
    one, and then a round once :func:`orphan_age_s` has passed since the last (None: none)."""

    def __init__(
        self,
        tables: Sequence[BronzeTable],
        every: float,
        min_files: int,
        storage_options: dict[str, str] | None = None,
        *,
        retention_s: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.tables = list(tables)
        self.every = every
        self.storage_options = storage_options
        self.min_files = min_files
        self.orphans_after_s = None if retention_s is None else orphan_age_s(retention_s)
        self._clock = clock
        self._last_full: float | None = None
        self.rounds = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run_once(self) -> list[UpkeepResult]:
        """One round over every table; a table that fails is logged and left for the next round."""
        now = self._clock()
        orphans = self.orphans_after_s
        full = orphans is not None and (self._last_full is None or now - self._last_full >= orphans)
        if full:
            self._last_full = now
        results = []
        for table in self.tables:
            if self._stop.is_set():
                break
            try:
                result = upkeep_table(
                    table, self.min_files, self.storage_options, orphans_after_s=orphans if full else None
                )
            except Exception as exc:  # a concurrent compaction, a table gone: the next round retries
                log.warning("delta upkeep of %s failed (next round retries): %s", table.path, str(exc)[:500])
                continue
            if result.partitions or result.vacuumed:
                log.info(
                    "delta upkeep of %s: %d partitions compacted (%d files into %d), %d old files deleted%s",
                    table.path,
                    result.partitions,
                    result.files_removed,
                    result.files_added,
                    result.vacuumed,
                    " (full vacuum: files no commit names included)" if full else "",
                )
            results.append(result)
        self.rounds += 1
        return results

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._loop, name="widehouse-delta-upkeep", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            self.run_once()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop after the table being kept up, if any (a compaction is one commit: never half done)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

"""What a slot group has committed to ClickHouse, so a replayed batch is a no-op whatever the downtime.

ClickHouse deduplicates a replayed insert only while its token is among the table's last
``non_replicated_deduplication_window`` insert blocks, a window every group writing the table shares:
with hundreds of groups it lasts minutes, and a group down for longer would count a replay twice.
So the sink does not rely on it:

- the group's **last committed batch** is the largest ``batch_id`` of its ``stream_progress`` rows
  (written last, after every other sink), read once when the group's first batch runs and then kept
  in memory; a batch at or below it is skipped entirely;
- the first batch after that may have been cut short by a crash: ``stream_sink_marks`` names the
  tables that already hold it (a mark is inserted right after each table's insert), and its replay
  skips those. Tables whose replayed rows collapse into the first ones
  (:data:`~widehouse.contracts.tables.COLLAPSED_ON_REPLAY`, the per-hour counts) get no mark: their
  replay writes them again, which readers' ``FINAL`` folds away.

Inserts still carry their deduplication token and ``async_insert=0``, a second line of defence for a
crash between an insert and its mark. They skip ClickHouse's merge on insert
(:meth:`~widehouse.clickhouse.client.ClickHouse.insert`'s ``folded``): a batch's rows are already one
per sorting key of their table (partial rows merged per (key, hour) on the driver, counts per
(hour, topic), progress rows per topic, one mark per table).

On a ClickHouse cluster both reads are sequentially consistent and progress rows and marks are
quorum inserts (:data:`widehouse.contracts.tables.IDEMPOTENCY_RECORDS`, applied by
:class:`widehouse.clickhouse.client.ClickHouse`): a restarted group whose first read lands on a
lagging replica gets an error (retried) rather than an older committed batch, which would make it
write a batch twice once the batch's tokens have left the deduplication window.
"""

from __future__ import annotations

import datetime as dt
import logging
import queue
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa

from widehouse.contracts.tables import COLLAPSED_ON_REPLAY, MARKS, MARKS_SHAPE, PROGRESS
from widehouse.stream.progress import BatchIdentity

if TYPE_CHECKING:
    from widehouse.clickhouse import ClickHouse

log = logging.getLogger("widehouse.stream")

_LAST_PROGRESS = (
    f"SELECT max(batch_id), count() FROM {PROGRESS} WHERE app = {{app:String}} AND `group` = {{group:String}}"
)
_LAST_MARK = (
    f"SELECT max(batch_id), count() FROM {MARKS} WHERE app = {{app:String}} AND `group` = {{group:String}}"
)
_MARKED = (
    f"SELECT DISTINCT `table` FROM {MARKS} "
    "WHERE app = {app:String} AND `group` = {group:String} AND batch_id = {batch:UInt64}"
)


def last_batch(client: ClickHouse, sql: str, app: str, group: str) -> int | None:
    """``max(batch_id)`` of a query over (app, group) rows; None when there are none."""
    rows = client.rows(sql, {"app": app, "group": group}, consistent=True)
    top, count = rows[0] if rows else (None, 0)
    return int(top) if count else None


def last_committed(client: ClickHouse, app: str, group: str) -> int | None:
    """The group's last batch whose progress rows are in ClickHouse (None: none yet)."""
    return last_batch(client, _LAST_PROGRESS, app, group)


def last_written(client: ClickHouse, app: str, group: str) -> int | None:
    """The largest batch id of (app, group) anywhere in ClickHouse: progress rows or sink marks."""
    found = [
        b
        for b in (last_committed(client, app, group), last_batch(client, _LAST_MARK, app, group))
        if b is not None
    ]
    return max(found) if found else None


@dataclass
class ClickHouseLedger:
    """The ClickHouse sink of one slot group: skips what is already committed, marks what it writes.

    One per group and query run (a restarted query gets a new one, which reads the state again).
    """

    client: Callable[[], ClickHouse]
    app: str
    group: str
    committed: int | None = None
    """The group's last committed batch, once :meth:`begin` has read it."""
    _loaded: bool = False
    lanes: int = 4
    """Tables :meth:`insert_all` writes at once."""
    _written: set[str] = field(default_factory=set)
    """Tables that already hold the batch in flight."""
    _siblings: list[ClickHouse] = field(default_factory=list)

    def begin(self, batch_id: int) -> bool:
        """Start ``batch_id``; False when it is already committed (the whole batch is skipped)."""
        client = self.client()
        first = not self._loaded
        if first:
            self.committed = last_committed(client, self.app, self.group)
            self._loaded = True
        if self.committed is not None and batch_id <= self.committed:
            log.info(
                "group %s batch %d: already committed to ClickHouse (last %d); skipped",
                self.group,
                batch_id,
                self.committed,
            )
            return False
        self._written = set()
        if first:  # only the first batch of a run can have been cut short by a crash
            rows = client.rows(
                _MARKED, {"app": self.app, "group": self.group, "batch": batch_id}, consistent=True
            )
            self._written = {str(r[0]) for r in rows}
            if self._written:
                log.info(
                    "group %s batch %d: replay after a crash; %s already written, skipped",
                    self.group,
                    batch_id,
                    ", ".join(sorted(self._written)),
                )
        return True

    def insert(self, table: str, data: pa.Table, identity: BatchIdentity) -> int:
        """Insert the batch's rows of ``table`` (unless already there), then mark the table written
        (no mark for a table in :data:`~widehouse.contracts.tables.COLLAPSED_ON_REPLAY`)."""
        return self._insert(self.client(), table, data, identity)

    def insert_all(
        self,
        writes: Sequence[tuple[str, pa.Table]],
        identity: BatchIdentity,
        after_first: Callable[[], None] | None = None,
    ) -> int:
        """:meth:`insert` every (table, rows) of the batch, up to :attr:`lanes` tables at once.

        Each lane is a connection of its own (a sibling of ``client``, kept for the next batches;
        one lane, ``client`` itself, where there are none: in-process chDB). A table's insert and
        its mark stay in that order on one connection, so a batch cut short anywhere leaves what
        :meth:`begin` expects: a table with a mark holds the batch's rows. ``after_first`` runs once
        the first table is written (fault injection: a failure mid-batch). With several lanes, the
        first failure is raised once every table's write has ended; with one, the first failure
        ends the batch's writes. Returns the rows sent.
        """
        pending = [(table, data) for table, data in writes if table not in self._written and data.num_rows]
        lanes = self._lanes(min(len(pending), self.lanes))
        free: queue.SimpleQueue[ClickHouse] = queue.SimpleQueue()
        for lane in lanes:
            free.put(lane)

        def write(number: int, table: str, data: pa.Table) -> int:
            lane = free.get()
            try:
                sent = self._insert(lane, table, data, identity)
            finally:
                free.put(lane)
            if number == 0 and after_first is not None:
                after_first()
            return sent

        if len(lanes) == 1:
            return sum(write(number, table, data) for number, (table, data) in enumerate(pending))
        with ThreadPoolExecutor(len(lanes), thread_name_prefix=f"clickhouse-{self.group}") as pool:
            futures = [
                pool.submit(write, number, table, data) for number, (table, data) in enumerate(pending)
            ]
        return sum(future.result() for future in futures)

    def _lanes(self, wanted: int) -> list[ClickHouse]:
        """``wanted`` connections of their own (at least one): siblings of ``client``, made once."""
        client = self.client()
        while len(self._siblings) < wanted:
            sibling = client.sibling()
            if sibling is client:  # no second connection to this engine
                return [client]
            self._siblings.append(sibling)
        return self._siblings[: max(wanted, 1)] if self._siblings else [client]

    def close(self) -> None:
        """Close the lanes' connections (``client`` is the caller's)."""
        siblings, self._siblings = self._siblings, []
        for sibling in siblings:
            sibling.close()

    def _insert(self, client: ClickHouse, table: str, data: pa.Table, identity: BatchIdentity) -> int:
        if table in self._written or data.num_rows == 0:
            return 0
        sent = client.insert(table, data, identity.token(table), folded=True)
        if table not in COLLAPSED_ON_REPLAY:  # a table whose replays fold away needs no mark
            self._mark(client, table, identity)
        self._written.add(table)
        return sent

    @staticmethod
    def _mark(client: ClickHouse, table: str, identity: BatchIdentity) -> None:
        """Record that ``table`` holds the batch (right after its insert, on the same connection)."""
        mark = pa.Table.from_pylist(
            [
                {
                    "app": identity.app,
                    "group": identity.group,
                    "batch_id": identity.batch_id,
                    "table": table,
                    "committed_at": dt.datetime.now(dt.UTC),
                }
            ],
            schema=MARKS_SHAPE.arrow_schema(),
        )
        client.insert(MARKS, mark, identity.token(f"{MARKS}:{table}"), folded=True)

    def commit(self, identity: BatchIdentity, progress: pa.Table) -> None:
        """Write the progress rows (the batch's commit in ClickHouse) and remember the batch."""
        if PROGRESS not in self._written:
            self.client().insert(PROGRESS, progress, identity.token(PROGRESS), folded=True)
        self.committed = identity.batch_id
        self._written = set()

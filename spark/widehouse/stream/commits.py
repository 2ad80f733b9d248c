"""What a slot group has committed to ClickHouse, so a replayed batch is a no-op whatever the downtime.

ClickHouse deduplicates a replayed insert only while its token is among the table's last
``non_replicated_deduplication_window`` insert blocks, a window every group writing the table shares:
with hundreds of groups it lasts minutes, and a group down for longer would count a replay twice.
So the sink does not rely on it:

- the group's **last committed batch** is the largest ``batch_id`` of its ``stream_progress`` rows
  (written last, after every other sink), read once when the group's first batch runs and then kept
  in memory; a batch at or below it is skipped entirely;
- the first batch after that may have been cut short by a crash: ``stream_sink_marks`` names the
  tables that already hold it (one insert marks all the tables of a batch once their inserts have
  ended), and its replay skips those. Two kinds of table get no mark:

  - tables whose replayed rows collapse into the first ones
    (:data:`~widehouse.contracts.tables.COLLAPSED_ON_REPLAY`, the per-hour counts): their replay
    writes them again, which readers' ``FINAL`` folds away;
  - tables that answer for their own batches (:data:`~widehouse.contracts.tables.BATCH_TRACED`,
    the quarantine and late events: a row per message, with its app, group and batch id): the
    replay of that one batch asks how many of its rows they hold, within the replayed rows' topics
    and time range (their sorting key), and skips a table that holds them all.

  So a batch makes one mark insert, for its partial tables, not one per table: parts are what a
  small insert costs ClickHouse.

Inserts still carry their deduplication token and ``async_insert=0``, a second line of defence for a
crash between an insert and the marks. They skip ClickHouse's merge on insert
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
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa

from widehouse.contracts.tables import BATCH_TRACED, COLLAPSED_ON_REPLAY, MARKS, MARKS_SHAPE, PROGRESS
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
_HELD = (
    "SELECT count() FROM {table} WHERE topic IN {{topics:Array(String)}} AND {time} BETWEEN "
    "fromUnixTimestamp64Micro({{low:Int64}}, 'UTC') AND fromUnixTimestamp64Micro({{high:Int64}}, 'UTC') "
    "AND app = {{app:String}} AND `group` = {{group:String}} AND batch_id = {{batch:UInt64}}"
)
"""How many rows of a batch a :data:`~widehouse.contracts.tables.BATCH_TRACED` table holds, among
those of the replayed rows' topics and time range."""
UNMARKED: frozenset[str] = COLLAPSED_ON_REPLAY | frozenset(BATCH_TRACED)
"""Tables a batch's insert leaves no sink mark for: their replays fold away, or they answer for
their own batches."""
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
    """The largest batch id of (app, group) in ClickHouse's records of batches: progress rows or
    sink marks. A batch a crash cut short before its partial tables were marked is not among them
    (its quarantine and late rows answer for it only when replayed); that matters to the checkpoint
    guard only for an app that never committed a batch, whose replay is then its own first batch."""
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
    _lanes_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _suspect: int | None = None
    """The batch in flight when a crash may have cut it short (the run's first, not committed): its
    :data:`~widehouse.contracts.tables.BATCH_TRACED` tables are asked whether they hold it."""

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
        self._suspect = batch_id if first else None
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
        (no mark for a table in :data:`~widehouse.contracts.tables.COLLAPSED_ON_REPLAY` or
        :data:`~widehouse.contracts.tables.BATCH_TRACED`)."""
        return self._write([self.client()], [(table, data)], identity, None)

    def insert_all(
        self,
        writes: Sequence[tuple[str, pa.Table]],
        identity: BatchIdentity,
        after_first: Callable[[], None] | None = None,
    ) -> int:
        """:meth:`insert` every (table, rows) of the batch, up to :attr:`lanes` tables at once, then
        one insert of the marks of all the tables written.

        Each lane is a connection of its own (a sibling of ``client``, kept for the next batches;
        one lane, ``client`` itself, where there are none: in-process chDB). The marks follow the
        tables' inserts, so a batch cut short anywhere leaves what :meth:`begin` expects: a table with
        a mark holds the batch's rows (a crash between a table's insert and the marks leaves it
        unmarked, and its replay sends the same rows with the same deduplication token). Tables
        written before a failure are marked before it is raised. ``after_first`` runs once the first
        table is written (fault injection: a failure mid-batch). With several lanes, the first
        failure is raised once every table's write has ended; with one, the first failure ends the
        batch's writes. Returns the rows sent.
        """
        pending = [(table, data) for table, data in writes if table not in self._written and data.num_rows]
        return self._write(self._lanes(min(len(pending), self.lanes)), pending, identity, after_first)

    def _write(
        self,
        lanes: list[ClickHouse],
        pending: Sequence[tuple[str, pa.Table]],
        identity: BatchIdentity,
        after_first: Callable[[], None] | None,
    ) -> int:
        """Every (table, rows) of ``pending`` over ``lanes``, then the marks of those written."""
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

        written_before = set(self._written)
        try:
            if len(lanes) == 1:
                sent = sum(write(number, table, data) for number, (table, data) in enumerate(pending))
            else:
                name = f"clickhouse-{self.group}"
                with ThreadPoolExecutor(len(lanes), thread_name_prefix=name) as pool:
                    futures = [pool.submit(write, n, table, data) for n, (table, data) in enumerate(pending)]
                sent = sum(future.result() for future in futures)
        except BaseException:
            self._mark_new(lanes[0], written_before, identity, failed=True)
            raise
        self._mark_new(lanes[0], written_before, identity)
        return sent

    def _mark_new(
        self, client: ClickHouse, before: set[str], identity: BatchIdentity, *, failed: bool = False
    ) -> None:
        """Mark the tables written since ``before`` that need a mark, in one insert. After a failed
        write (``failed``) a failure to mark is logged, and the write's own error is the one raised:
        the unmarked tables' replay then relies on their tokens, as after a crash."""
        tables = sorted(t for t in self._written - before if t not in UNMARKED)
        if not tables:
            return
        try:
            self._mark(client, tables, identity)
        except Exception as exc:
            if not failed:
                raise
            log.warning(
                "group %s batch %d: the marks of %s were not written: %s",
                self.group,
                identity.batch_id,
                ", ".join(tables),
                exc,
            )

    def open_lanes(self) -> None:
        """Open every lane's connection now (each costs a few round trips: the client asks the
        server for its version, time zone and settings), so a run's first batch does not wait for
        them in its inserts; :meth:`insert_all` opens any still missing itself."""
        self._lanes(self.lanes)

    def _lanes(self, wanted: int) -> list[ClickHouse]:
        """``wanted`` connections of their own (at least one): siblings of ``client``, made once."""
        client = self.client()
        with self._lanes_lock:
            while len(self._siblings) < wanted:
                sibling = client.sibling()
                if sibling is client:  # no second connection to this engine
                    return [client]
                self._siblings.append(sibling)
            return self._siblings[: max(wanted, 1)] if self._siblings else [client]

    def close(self) -> None:
        """Close the lanes' connections (``client`` is the caller's)."""
        with self._lanes_lock:
            siblings, self._siblings = self._siblings, []
        for sibling in siblings:
            sibling.close()

    def _insert(self, client: ClickHouse, table: str, data: pa.Table, identity: BatchIdentity) -> int:
        """The batch's rows of ``table``, unless the table holds them (known from the marks, or asked:
        :meth:`_holds`); the caller marks it."""
        if table in self._written or data.num_rows == 0:
            return 0
        if (
            identity.batch_id == self._suspect
            and table in BATCH_TRACED
            and self._holds(client, table, data, identity)
        ):
            self._written.add(table)
            return 0
        sent = client.insert(table, data, identity.token(table), folded=True)
        self._written.add(table)
        return sent

    def _holds(self, client: ClickHouse, table: str, data: pa.Table, identity: BatchIdentity) -> bool:
        """Whether ``table`` (a :data:`~widehouse.contracts.tables.BATCH_TRACED` one) already holds
        the rows ``data`` replays: it has as many rows of the batch, among those of the replayed rows'
        topics and time range (its sorting key). Fewer but some (a large insert cut short between its
        blocks) is logged, and the rows are sent again: their token keeps the blocks it holds."""
        import pyarrow.compute as pc

        micros = data.column(BATCH_TRACED[table]).cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
        bounds = pc.min_max(micros)
        parameters = {
            "topics": sorted(set(data.column("topic").to_pylist())),
            # the table keeps milliseconds: a millisecond's margin on either side
            "low": int(bounds["min"].as_py()) - 1000,
            "high": int(bounds["max"].as_py()) + 1000,
            "app": identity.app,
            "group": identity.group,
            "batch": identity.batch_id,
        }
        sql = _HELD.format(table=table, time=BATCH_TRACED[table])
        held = int(client.rows(sql, parameters, consistent=True)[0][0])
        if held >= data.num_rows:
            log.info(
                "group %s batch %d: replay after a crash; %s already holds its %d rows, skipped",
                self.group,
                identity.batch_id,
                table,
                held,
            )
            return True
        if held:
            log.warning(
                "group %s batch %d: replay after a crash; %s holds %d of its %d rows; sending them again "
                "(the insert's deduplication token keeps the blocks it holds)",
                self.group,
                identity.batch_id,
                table,
                held,
                data.num_rows,
            )
        return False

    @staticmethod
    def _mark(client: ClickHouse, tables: Sequence[str], identity: BatchIdentity) -> None:
        """Record that ``tables`` hold the batch (once their inserts have ended), in one insert."""
        now = dt.datetime.now(dt.UTC)
        marks = pa.Table.from_pylist(
            [
                {
                    "app": identity.app,
                    "group": identity.group,
                    "batch_id": identity.batch_id,
                    "table": table,
                    "committed_at": now,
                }
                for table in tables
            ],
            schema=MARKS_SHAPE.arrow_schema(),
        )
        client.insert(MARKS, marks, identity.token(f"{MARKS}:{','.join(tables)}"), folded=True)

    def commit(self, identity: BatchIdentity, progress: pa.Table) -> None:
        """Write the progress rows (the batch's commit in ClickHouse) and remember the batch."""
        if PROGRESS not in self._written:
            self.client().insert(PROGRESS, progress, identity.token(PROGRESS), folded=True)
        self.committed = identity.batch_id
        self._written = set()
        self._suspect = None

"""The driver side of the Pulsar source: where each batch ends, how it is cut, what is committed.

Spark runs a Python stream reader in its own long-lived Python process next to the driver JVM; the
:class:`StreamController` lives there and keeps what makes a micro-batch cheap across thousands of
partitions: one admin thread pool, the last known end of every partition, and the app's durable
subscriptions with their zero-queue consumers (change detection and commits over the binary
protocol). Nothing here imports pyspark, so it is tested against the real broker without Spark.

Per micro-batch (:meth:`StreamController.latest_offset`):

1. discover partitions (one namespace listing per namespace);
2. ask attached consumers for last message ids (async), and examine only the partitions whose end
   moved (position + broker index of the last entry, in parallel); an ``AvailableNow`` run asks
   none of this: its batches take the ends its preparation examined;
3. resolve where new partitions start: right after a mark handed over from the slot group that read
   them before (``startAfter``, :mod:`.handover`), else ``startingOffsets`` for the first batch
   and the earliest message after;
4. admission control on exact backlogs (index arithmetic); locate cut points inside partitions
   (at most ``maxCutPartitions``: beyond, whole partitions take turns), a cut ending at the end of
   an entry up to ``cutSlack`` of its take short when a probe of the search lands on one;
5. return the end offset; a vanished partition or a topic recreated under us is data loss when
   it had unread messages (fails only with ``failOnDataLoss``). A partition the query no longer
   selects (a replan moved its topic to another group) is dropped without a data-loss check: the
   group that reads it now continues from this query's committed mark.

The subscriptions of partitions new to the query are set up on the keeper's own thread
(:meth:`SubscriptionKeeper.attach_soon`): the batch is planned without waiting for them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

from widehouse.errors import PulsarError
from widehouse.pulsar.positions import EntryInfo, Mark, Position, TopicPartition
from widehouse.source.admission import drain_slack, fewer_cuts, plan_takes, should_wait
from widehouse.source.broker import BrokerView, DataLossError
from widehouse.source.handover import resolve_handover
from widehouse.source.offsets import PartitionOffset, PositionSpec, SourceOffset
from widehouse.source.options import NO_LIMIT, SourceOptions
from widehouse.source.planning import ReadTask, Slice, plan_tasks
from widehouse.source.subscriptions import SubscriptionKeeper

log = logging.getLogger("widehouse.pulsar.source")


class _Base:
    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._view: BrokerView | None = None

    @property
    def view(self) -> BrokerView:
        if self._view is None:
            self._view = BrokerView(self.options.pulsar, concurrency=self.options.admin_concurrency)
        return self._view

    def _resolve(
        self,
        parts: Sequence[TopicPartition],
        spec_of: Callable[[TopicPartition], PositionSpec],
        ends: Mapping[TopicPartition, EntryInfo | None],
    ) -> dict[TopicPartition, Mark | None]:
        """Marks for positions given by a spec (None: the partition is empty, nothing to mark)."""
        specs: dict[TopicPartition, PositionSpec] = {tp: spec_of(tp) for tp in parts}
        earliest = [tp for tp, s in specs.items() if s.kind == "earliest" and ends.get(tp) is not None]
        firsts, _missing = self.view.first_entries(earliest)
        at = [tp for tp, s in specs.items() if s.kind == "at"]

        def before(tp: TopicPartition) -> Mark:
            position = specs[tp].position
            assert position is not None
            return self.view.mark_before(tp, position)

        located = dict(zip(at, self.view.map(before, at), strict=True))
        out: dict[TopicPartition, Mark | None] = {}
        for tp, spec in specs.items():
            end = ends.get(tp)
            if spec.kind == "at":
                out[tp] = located[tp]
            elif end is None:
                out[tp] = None
            elif spec.kind == "latest":
                out[tp] = end.mark
            else:
                out[tp] = self.view.earliest_mark(tp, firsts.get(tp))
        return out

    def _split(self, piece: Slice, targets: list[int]) -> list[Mark]:
        marks = []
        previous = piece.start
        for target in targets:
            previous = self.view.locate(piece.tp, previous, piece.end, target)
            marks.append(previous)
        return marks

    def _tasks(self, slices: list[Slice]) -> list[ReadTask]:
        o = self.options
        return plan_tasks(slices, o.messages_per_task, o.max_partitions_per_task, o.min_tasks, self._split)

    def close(self) -> None:
        if self._view is not None:
            self._view.close()
            self._view = None


class StreamController(_Base):
    """Offsets, tasks and commits of one streaming query (see the module docstring)."""

    def __init__(self, options: SourceOptions) -> None:
        super().__init__(options.for_stream())
        self._keeper: SubscriptionKeeper | None = None
        self._last: dict[TopicPartition, EntryInfo | None] = {}
        self._target: dict[TopicPartition, EntryInfo | None] | None = None
        self._seen: dict[TopicPartition, int] = {}  # highest broker index seen per partition
        self._last_batch_at = time.monotonic()
        self._rotation = 0
        self._turn: tuple[str, int] | None = None  # the last partition admitted whole by fewer_cuts
        self._report: dict[str, Any] | None = None

    @property
    def keeper(self) -> SubscriptionKeeper | None:
        o = self.options
        if self._keeper is None and o.durable_subscription and o.app_id:
            self._keeper = SubscriptionKeeper(
                o.pulsar, o.app_id, self.view, o.subscription_prefix, o.heartbeat_interval_s
            )
        return self._keeper

    # -- Spark's calls ------------------------------------------------------------------------
    def initial_offset(self) -> dict[str, Any]:
        return SourceOffset(app=self.options.app_id or "", initial=True).to_json()

    def prepare_available_now(self) -> None:
        """Trigger.AvailableNow: read up to the ends the partitions have now, and no further."""
        parts = sorted(self.view.discover(self.options.selector))
        found, missing = self.view.last_entries(parts)
        self._target = found
        self._remember(found, missing)

    def latest_offset(self, start_json: Mapping[str, Any], budget: int | None) -> dict[str, Any]:
        """The end of the next batch (``start_json`` itself when there is nothing to read).

        ``budget``: messages Spark admits (None: everything available, caps ignored).
        """
        start = SourceOffset.from_json(start_json)
        known = start.partitions
        parts = self.view.discover(self.options.selector)
        ends, missing = self._ends(sorted(parts))
        gone = {tp for tp in known if tp not in parts} | (missing & set(known))
        still_selected = self.options.selector.select([tp.name for tp in gone])
        deselected = {tp for tp in gone if tp not in still_selected}
        for tp in sorted(deselected):
            log.info("%s is no longer selected (moved to another group); dropped from the query", tp)
        self._report_gone(gone - deselected, known)
        self.view.forget(gone)
        live = sorted(tp for tp in parts if tp not in missing)
        starts, recorded = self._starts(live, start, ends)
        ceilings = self._ceilings(starts, ends)
        available = {tp: max(0, c.index - starts[tp].index) if c else 0 for tp, c in ceilings.items()}
        waited_ms = (time.monotonic() - self._last_batch_at) * 1000
        draining = self._target is not None
        if should_wait(sum(available.values()), self.options.limits, waited_ms, draining):
            return dict(start_json)
        end_marks = self._end_marks(starts, ceilings, available, budget)
        entries: dict[TopicPartition, PartitionOffset] = {}
        for tp, mark in starts.items():
            latest_entry = ends.get(tp)
            end_mark = end_marks[tp]
            latest = max(latest_entry.index if latest_entry else mark.index, end_mark.index)
            first: Position | Literal["previous"] | None = (
                recorded[tp].position if tp in recorded else "previous"
            )
            entries[tp] = PartitionOffset(end_mark, mark.index, latest, first)
        keeper = self.keeper
        if keeper is not None:
            keeper.detach(gone)
            attached = keeper.attached  # a copy each time it is read
            keeper.attach_soon({tp: starts.get(tp, Mark(None, -1)) for tp in live if tp not in attached})
        end = SourceOffset(entries, app=self.options.app_id or "")
        self._report = _report(entries)
        if (start.initial and not entries) or (not start.initial and end.same_positions(start)):
            if keeper is not None:  # Spark asks again only after the previous batch completed
                keeper.commit({tp: e.mark for tp, e in known.items()})
                if self._target is not None:
                    # AvailableNow is done and Spark may kill this process any moment: closing the
                    # consumers flushes the acks (otherwise grouped for up to 100 ms)
                    keeper.close()
                    self._keeper = None
            return dict(start_json)
        self._last_batch_at = time.monotonic()
        self._rotation += 1
        return end.to_json()

    def _starts(
        self,
        live: Sequence[TopicPartition],
        start: SourceOffset,
        ends: Mapping[TopicPartition, EntryInfo | None],
    ) -> tuple[dict[TopicPartition, Mark], dict[TopicPartition, Mark]]:
        """Where each partition's next batch starts, and which of those are recorded (new ones)."""
        known = start.partitions
        starts: dict[TopicPartition, Mark] = {}
        recorded: dict[TopicPartition, Mark] = {}
        after = self.options.start_after
        fresh = [tp for tp in live if tp not in known and tp not in after]
        policy = self.options.starting.for_partition if start.initial else _earliest
        for tp, mark in self._resolve(fresh, policy, ends).items():
            if mark is not None:
                starts[tp] = recorded[tp] = mark
        handed = [tp for tp in live if tp not in known and tp in after]
        for tp, mark in self._handed_over(handed, ends).items():
            starts[tp] = recorded[tp] = mark
        for tp in live:
            if tp in known:
                starts[tp] = known[tp].mark
        self._check_regressions(starts, recorded, ends, known)
        return starts, recorded

    def _handed_over(
        self, parts: Sequence[TopicPartition], ends: Mapping[TopicPartition, EntryInfo | None]
    ) -> dict[TopicPartition, Mark]:
        """Start marks of partitions new to the query that another group committed (``startAfter``)."""
        nonempty = [tp for tp in parts if ends.get(tp) is not None]
        firsts, _missing = self.view.first_entries(nonempty)
        out: dict[TopicPartition, Mark] = {}
        for tp in nonempty:
            mark = self.options.start_after[tp]
            decision = resolve_handover(tp, mark, firsts.get(tp), ends.get(tp))
            if decision.data_loss:
                self._data_loss(decision.problem or str(tp))
            elif decision.problem:
                log.info("%s", decision.problem)
            else:
                log.info("%s continues after index %d, handed over by its previous group", tp, mark.index)
            if decision.start is not None:
                out[tp] = decision.start
        return out

    def _ceilings(
        self, starts: Mapping[TopicPartition, Mark], ends: Mapping[TopicPartition, EntryInfo | None]
    ) -> dict[TopicPartition, EntryInfo | None]:
        """How far each partition may be read now (AvailableNow: never past the prepared ends)."""
        ceilings: dict[TopicPartition, EntryInfo | None] = {}
        for tp in starts:
            ceiling = ends.get(tp)
            if self._target is not None:
                target = self._target.get(tp)
                if ceiling is None or target is None:
                    ceiling = None
                elif target.index < ceiling.index:
                    ceiling = target
            ceilings[tp] = ceiling
        return ceilings

    def _end_marks(
        self,
        starts: Mapping[TopicPartition, Mark],
        ceilings: Mapping[TopicPartition, EntryInfo | None],
        available: Mapping[TopicPartition, int],
        budget: int | None,
    ) -> dict[TopicPartition, Mark]:
        """Admission control, then the exact mark each partition's batch ends at."""
        limits = self.options.limits
        backlog = {(tp.topic, tp.partition): n for tp, n in available.items()}
        takes = plan_takes(backlog, limits, budget, self._rotation)
        takes, self._turn = fewer_cuts(
            takes,
            backlog,
            limits.max_cuts,
            self._turn,
            keep=lambda key: limits.cap(key[0]) is not None,
        )
        take = {tp: takes[(tp.topic, tp.partition)] for tp in starts}
        marks: dict[TopicPartition, Mark] = {}
        cut = []
        for tp, mark in starts.items():
            ceiling = ceilings[tp]
            if take[tp] <= 0 or ceiling is None:
                marks[tp] = mark
            elif take[tp] >= available[tp]:
                marks[tp] = ceiling.mark
            else:
                cut.append(tp)

        asks = []
        for tp in cut:
            ceiling = ceilings[tp]
            assert ceiling is not None
            asks.append((tp, starts[tp], ceiling.mark, starts[tp].index + take[tp]))
        slack = limits.cut_slack
        if self._target is not None and budget is not None:  # a drain: no batch more for the slack
            slack = drain_slack(slack, sum(available.values()), budget, sum(take[tp] for tp in cut))
        marks.update(zip(cut, self.view.locate_all(asks, slack), strict=True))
        return marks

    def report_latest(self) -> dict[str, Any] | None:
        return self._report

    def plan(self, start_json: Mapping[str, Any], end_json: Mapping[str, Any]) -> list[ReadTask]:
        """The read tasks of the batch ``(start, end]`` (deterministic for the same offsets)."""
        start = SourceOffset.from_json(start_json)
        end = SourceOffset.from_json(end_json)
        slices = []
        for tp, entry in sorted(end.partitions.items()):
            begin = entry.start_mark
            if begin is None:
                previous = start.partitions.get(tp)
                if previous is None:
                    raise PulsarError(f"offset of {tp} has no start: not a batch this source planned")
                begin = previous.mark
            if entry.mark.index > begin.index:
                slices.append(Slice(tp.topic, tp.partition, begin, entry.mark))
        return self._tasks(slices)

    def commit(self, end_json: Mapping[str, Any]) -> None:
        keeper = self.keeper
        if keeper is not None:
            end = SourceOffset.from_json(end_json)
            keeper.commit({tp: e.mark for tp, e in end.partitions.items()})

    def stop(self) -> None:
        if self._keeper is not None:
            self._keeper.close()
            self._keeper = None
        self.close()

    # -- helpers ------------------------------------------------------------------------------
    def _remember(
        self, found: Mapping[TopicPartition, EntryInfo | None], missing: Iterable[TopicPartition]
    ) -> None:
        """Keep the examined ends (and the highest index seen) of partitions; forget missing ones."""
        self._last.update(found)
        for tp, info in found.items():
            if info is not None:
                self._seen[tp] = max(self._seen.get(tp, -1), info.index)
        for tp in missing:
            self._last.pop(tp, None)

    def _ends(
        self, parts: Sequence[TopicPartition]
    ) -> tuple[dict[TopicPartition, EntryInfo | None], set[TopicPartition]]:
        """Last entry of every partition; examines only those whose last message id moved.

        Under AvailableNow nothing is read past the ends the preparation examined, and an end only
        grows, so a partition seen then (or since) keeps the end last seen and is asked nothing
        again in this run: neither its last message id (a thousand asks every trigger with 1,000
        partitions) nor, while its subscription is still being set up and no consumer can answer,
        its last entry over REST (a thousand examinations, ~1.5 s of a 1,000-topic drain's second
        trigger here). Its lag is counted to that end. Deleting such a partition is still noticed
        (discovery); recreating it is noticed by the next run, which has something of it to read."""
        keeper = self.keeper
        seen = set(self._last) if self._target is not None else set()
        asked = [tp for tp in parts if tp not in seen]
        positions = keeper.last_positions(asked) if keeper is not None and asked else {}
        stale = [
            tp
            for tp in asked
            if not (tp in positions and tp in self._last and _same(positions[tp], self._last[tp]))
        ]
        found, missing = self.view.last_entries(stale)
        self._remember(found, missing)
        return {tp: self._last.get(tp) for tp in parts if tp not in missing}, missing

    def _report_gone(
        self, gone: Iterable[TopicPartition], known: Mapping[TopicPartition, PartitionOffset]
    ) -> None:
        for tp in sorted(gone):
            entry = known[tp]
            unread = max(entry.latest, self._seen.pop(tp, -1)) - entry.mark.index
            if unread > 0:
                self._data_loss(f"{tp} was deleted with {unread} unread message(s)")
            else:
                log.info("%s no longer exists (nothing unread); dropped from the query", tp)

    def _check_regressions(
        self,
        starts: dict[TopicPartition, Mark],
        recorded: dict[TopicPartition, Mark],
        ends: Mapping[TopicPartition, EntryInfo | None],
        known: Mapping[TopicPartition, PartitionOffset],
    ) -> None:
        """A partition that lost messages it had, or whose broker index went backwards, was
        deleted and recreated (or emptied): report what was unread, restart it from the earliest."""
        reset = []
        for tp, mark in starts.items():
            if tp not in known or mark.position is None:
                continue
            end = ends.get(tp)
            unread = max(known[tp].latest, self._seen.get(tp, -1)) - mark.index
            if end is None and unread > 0:
                self._data_loss(f"{tp} lost its {unread} unread message(s): it is empty now")
                reset.append(tp)
            elif end is not None and end.index < mark.index:
                message = f"{tp} was recreated (broker index went back from {mark.index} to {end.index})"
                if unread > 0:
                    self._data_loss(f"{message} with {unread} unread message(s)")
                else:
                    log.info("%s; reading it from its earliest message", message)
                reset.append(tp)
        if reset:
            firsts, _missing = self.view.first_entries(reset)
            for tp in reset:
                starts[tp] = recorded[tp] = self.view.earliest_mark(tp, firsts.get(tp))
                end = ends.get(tp)
                self._seen[tp] = end.index if end is not None else -1

    def _data_loss(self, message: str) -> None:
        if self.options.fail_on_data_loss:
            raise DataLossError(f"data loss: {message}; set failOnDataLoss=false to go on without it")
        log.warning("data loss: %s (failOnDataLoss=false: going on)", message)


class BatchPlanner(_Base):
    """``spark.read.format("pulsar")``: the tasks between startingOffsets and endingOffsets."""

    def plan(self) -> list[ReadTask]:
        o = self.options
        parts = sorted(self.view.discover(o.selector))
        ends, missing = self.view.last_entries(parts)
        live = [tp for tp in parts if tp not in missing]
        begins = self._resolve(live, o.starting.for_partition, ends)
        assert o.ending is not None
        stops = self._resolve(live, o.ending.for_partition, ends)
        slices = []
        for tp in live:
            begin, stop = begins.get(tp), stops.get(tp)
            if begin is not None and stop is not None and stop.index > begin.index:
                slices.append(Slice(tp.topic, tp.partition, begin, stop))
        return self._tasks(slices)


def budget_of(max_rows: int | None) -> int | None:
    """Spark's read limit as a budget: None reads everything; NO_LIMIT keeps per-topic caps only."""
    if max_rows is None:
        return None
    return max_rows if max_rows < NO_LIMIT else NO_LIMIT


def _earliest(_tp: TopicPartition) -> PositionSpec:
    return PositionSpec("earliest")


def _same(position: Position, info: EntryInfo | None) -> bool:
    if info is None:
        return position.entry < 0
    return position.ledger == info.position.ledger and position.entry == info.position.entry


def _report(entries: Mapping[TopicPartition, PartitionOffset]) -> dict[str, Any]:
    """What ``reportLatestOffset`` shows in the query progress: backlog after the planned batch."""
    backlog: dict[str, int] = {}
    for tp, entry in entries.items():
        backlog[tp.topic] = backlog.get(tp.topic, 0) + entry.lag
    top = sorted(backlog.items(), key=lambda kv: (-kv[1], kv[0]))[:50]
    return {
        "partitions": len(entries),
        "backlog": sum(backlog.values()),
        "topBacklogs": {t: n for t, n in top if n > 0},
    }

"""What the Pulsar source asks the brokers: which partitions exist, where they end, where message N is.

- **Discovery** lists each namespace once (one REST call returns every persistent topic and every
  partition that exists), whatever the number of topics, and keeps the selected ones; several
  namespaces' lists are asked pipelined.
- **Ends** of partitions come from ``examinemessage`` (position and broker index of the last
  entry), many partitions' asked pipelined, the rest in parallel over a small thread pool with one
  HTTP session per thread.
- **Locate** finds the position of the message with a given broker index without reading data:
  an interpolation search over the partition's entries (ledger list from ``internalStats``), each
  probe one ``ledger/{l}/entry/{e}`` call; usually one or two probes. With a ``slack`` (a
  stream's budget is a ceiling, not a count to meet) a probed entry that ends up to that share of
  the take short of the message ends the search there, at a whole entry. A batch's cut partitions
  are searched side by side, each round of their probes sent pipelined
  (:meth:`BrokerView.locate_all`). The ledger list is kept per partition and listed again only when
  it does not hold the batch's end (a new ledger, or the open one grown past it): ledgers before
  the last listed one are closed and never change, the last one only grows. ``internalStats`` is
  the broker's costliest answer here (~16 ms; a stream of small batches asked it for every cut
  partition of every batch).

Pipelined requests go through :mod:`widehouse.pulsar.bulk`; whatever cannot go that way (TLS, a
proxy, an unexpected answer) goes through :class:`~widehouse.pulsar.admin.PulsarAdmin`.
No Spark here.
"""

from __future__ import annotations

import bisect
import contextlib
import json
import re
import threading
from collections.abc import Callable, Generator, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from typing import Any, TypeVar

from widehouse.errors import ConfigError, PulsarError
from widehouse.pulsar import bulk
from widehouse.pulsar.admin import (
    PulsarAdmin,
    TopicNotFoundError,
    entry_from_headers,
    entry_request,
    examine_request,
    internal_stats_request,
    list_topics_request,
)
from widehouse.pulsar.auth import PulsarAuthError
from widehouse.pulsar.positions import EntryInfo, Mark, Position, TopicPartition
from widehouse.pulsar.topics import TopicName
from widehouse.settings import PulsarSettings

T = TypeVar("T")
R = TypeVar("R")
_MAX_PROBES = 64
_Probes = Generator[tuple[int, int], EntryInfo, Mark]
"""A running locate: yields ``(ledger, entry)`` to probe, is sent the entry there, returns the mark."""
_Running = tuple[TopicPartition, _Probes, tuple[int, int]]
"""A search of :meth:`BrokerView.locate_all`: its partition, the search, the probe it waits on."""


class DataLossError(PulsarError):
    """Messages a query should have read are gone (deleted topic, retention, recreated topic)."""


@dataclass(frozen=True)
class TopicSelector:
    """Explicit topics (full names; a ``-partition-N`` name selects that partition only), or a
    regular expression over the topics of some namespaces. A pattern containing ``://`` is matched
    against the full topic name, otherwise against the topic's local name."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None
    namespaces: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if bool(self.topics) == bool(self.pattern):
            raise ConfigError("give either topics or topicsPattern (with namespaces), not both or neither")
        if self.pattern and not self.namespaces:
            raise ConfigError("topicsPattern needs namespaces (comma-separated tenant/namespace)")

    @property
    def regex(self) -> re.Pattern[str] | None:
        return re.compile(self.pattern) if self.pattern else None

    def namespaces_to_list(self) -> list[str]:
        if self.pattern:
            return sorted(set(self.namespaces))
        return sorted({TopicName.parse(t).full_namespace for t in self.topics})

    def select(self, listed: Iterable[str]) -> set[TopicPartition]:
        """The partitions among ``listed`` (names from a namespace listing) this selector reads."""
        chosen: set[TopicPartition] = set()
        if self.pattern:
            regex = self.regex
            assert regex is not None
            full = "://" in self.pattern
            for name in listed:
                tp = TopicPartition.of(name)
                local = TopicName.parse(tp.topic).local
                if local.startswith("__"):
                    continue  # Pulsar system topics
                if regex.fullmatch(tp.topic if full else local):
                    chosen.add(tp)
            return chosen
        wanted_bases, wanted_parts = self._wanted
        for name in listed:
            tp = TopicPartition.of(name)
            if tp.topic in wanted_bases or tp in wanted_parts:
                chosen.add(tp)
        return chosen

    @cached_property
    def _wanted(self) -> tuple[frozenset[str], frozenset[TopicPartition]]:
        """The explicit topics as (whole topics, single partitions), parsed once: :meth:`select`
        runs at every trigger and for every partition a query lost."""
        names = [TopicName.parse(t) for t in self.topics]
        bases = frozenset(str(n) for n in names if n.partition_index is None)
        parts = frozenset(TopicPartition.of(str(n)) for n in names if n.partition_index is not None)
        return bases, parts


class BrokerView:
    """Parallel, read-only questions to the brokers (one per source process; see module doc)."""

    def __init__(self, settings: PulsarSettings, concurrency: int = 16, timeout: float = 30.0) -> None:
        self.settings = settings
        self.concurrency = max(1, concurrency)
        self.timeout = timeout
        self._local = threading.local()
        self._admins: list[PulsarAdmin] = []
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._tables: dict[TopicPartition, _EntryTable] = {}
        """The last ledger list of each partition :meth:`locate` asked for (see the module doc)."""

    # -- plumbing ----------------------------------------------------------------------------
    def admin(self) -> PulsarAdmin:
        """This thread's admin client (a requests session is not shared across threads)."""
        admin: PulsarAdmin | None = getattr(self._local, "admin", None)
        if admin is None:
            admin = PulsarAdmin(self.settings, timeout=self.timeout)
            self._local.admin = admin
            with self._lock:
                self._admins.append(admin)
        return admin

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        """``fn`` over ``items`` on the thread pool (inline for one item); errors propagate."""
        if len(items) <= 1:
            return [fn(item) for item in items]
        with self._lock:  # the triggers' thread and the subscription keeper's may both come first
            pool = self._pool
            if pool is None:
                pool = self._pool = ThreadPoolExecutor(
                    self.concurrency, thread_name_prefix="widehouse-pulsar-admin"
                )
        return list(pool.map(fn, items))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        with self._lock:
            for admin in self._admins:
                admin.close()
            self._admins.clear()

    # -- discovery ---------------------------------------------------------------------------
    def discover(self, selector: TopicSelector) -> set[TopicPartition]:
        """Every existing partition the selector reads (one listing per namespace)."""
        namespaces = selector.namespaces_to_list()

        def listing(namespace: str) -> list[str]:
            try:
                return self.admin().list_topics(namespace)
            except PulsarAuthError:
                raise  # already names the namespace and the role; keep its kind for callers
            except PulsarError as exc:
                raise PulsarError(f"cannot list the topics of namespace {namespace}: {exc}") from exc

        listed = self._listed_pipelined(namespaces)
        rest = [n for n in namespaces if n not in listed]
        listed.update(zip(rest, self.map(listing, rest), strict=True))
        chosen: set[TopicPartition] = set()
        for namespace in namespaces:
            chosen |= selector.select(listed[namespace])
        return chosen

    def _listed_pipelined(self, namespaces: Sequence[str]) -> dict[str, list[str]]:
        """The namespaces' topic lists sent pipelined; those answered otherwise than with a list are
        left out (the admin client asks them again and explains a refusal)."""
        answers = self._pipelined_json([list_topics_request(n) for n in namespaces])
        out: dict[str, list[str]] = {}
        for namespace, names in zip(namespaces, answers, strict=True):
            if isinstance(names, list) and all(isinstance(n, str) for n in names):
                out[namespace] = sorted(names)
        return out

    def _pipelined_json(self, calls: Sequence[bulk.Request]) -> list[Any]:
        """The JSON body of each call's answer, the calls sent pipelined; None for a call answered
        otherwise than 200 with JSON. All None when there is one call (the admin client's pooled
        connection is cheaper) or the calls cannot go pipelined (TLS, a proxy)."""
        answers = self.admin().pipelined(calls, self.concurrency) if len(calls) >= 2 else None
        if answers is None:
            return [None] * len(calls)
        out: list[Any] = []
        for answer in answers:
            body = None
            if isinstance(answer, bulk.Answer) and answer.status == 200:
                with contextlib.suppress(ValueError):  # not JSON: left to the admin client
                    body = json.loads(answer.body)
            out.append(body)
        return out

    # -- ends of partitions --------------------------------------------------------------------
    def last_entries(
        self, parts: Sequence[TopicPartition]
    ) -> tuple[dict[TopicPartition, EntryInfo | None], set[TopicPartition]]:
        """The last entry of each partition (None if empty) and the set of partitions not found."""
        return self._examine(parts, "latest")

    def first_entries(
        self, parts: Sequence[TopicPartition]
    ) -> tuple[dict[TopicPartition, EntryInfo | None], set[TopicPartition]]:
        """The first available entry of each partition (None if empty) and those not found."""
        return self._examine(parts, "earliest")

    def _examine(
        self, parts: Sequence[TopicPartition], which: str
    ) -> tuple[dict[TopicPartition, EntryInfo | None], set[TopicPartition]]:
        def one(tp: TopicPartition) -> EntryInfo | TopicPartition | None:
            try:
                return self.admin().examine(tp.name, which)
            except TopicNotFoundError:
                return tp

        results = self._examine_pipelined(parts, which)
        rest = [tp for tp in parts if tp not in results]
        results.update(zip(rest, self.map(one, rest), strict=True))
        found: dict[TopicPartition, EntryInfo | None] = {}
        missing: set[TopicPartition] = set()
        for tp in parts:
            result = results[tp]
            if isinstance(result, TopicPartition):
                missing.add(result)
            else:
                found[tp] = result
        return found, missing

    def _examine_pipelined(
        self, parts: Sequence[TopicPartition], which: str
    ) -> dict[TopicPartition, EntryInfo | TopicPartition | None]:
        """:meth:`_examine`'s answers sent pipelined (:mod:`widehouse.pulsar.bulk`): each partition's
        entry, itself when it does not exist, None when it is empty. Partitions without such an
        answer (an error, a refusal, a redirect) are left out: the admin client asks them again."""
        if len(parts) < 2:
            return {}
        answers = self.admin().pipelined([examine_request(tp.name, which) for tp in parts], self.concurrency)
        if answers is None:
            return {}
        out: dict[TopicPartition, EntryInfo | TopicPartition | None] = {}
        for tp, answer in zip(parts, answers, strict=True):
            if isinstance(answer, bulk.Answer):
                if answer.status == 200:
                    out[tp] = entry_from_headers(tp.name, answer.headers)
                elif answer.status == 404:
                    out[tp] = tp
                elif answer.status == 412:  # "the total message is zero"
                    out[tp] = None
        return out

    def earliest_mark(self, tp: TopicPartition, first: EntryInfo | None) -> Mark:
        """The mark "nothing consumed yet" of a partition whose first entry is ``first``."""
        return Mark(None, -1 if first is None else first.first_index - 1)

    # -- positions of given indexes ----------------------------------------------------------
    def ledgers(self, tp: TopicPartition) -> list[tuple[int, int]]:
        """``(ledger id, entries)`` of a partition, oldest first, the open ledger included."""
        return ledger_list(self.admin().internal_stats(tp.name))

    def _list_pipelined(self, parts: Sequence[TopicPartition]) -> None:
        """The ledger lists of ``parts`` asked pipelined and kept; those answered otherwise than
        with internal stats are left out (:meth:`locate` lists them again and explains an error)."""
        answers = self._pipelined_json([internal_stats_request(tp.name) for tp in parts])
        for tp, stats in zip(parts, answers, strict=True):
            if stats is None:
                continue
            try:
                table = _EntryTable(ledger_list(stats))
            except (ValueError, TypeError, KeyError, AttributeError):
                continue
            with self._lock:
                self._tables[tp] = table

    def locate(self, tp: TopicPartition, lo: Mark, hi: Mark, target: int, slack: float = 0.0) -> Mark:
        """The mark of having consumed through the message with broker index ``target``.

        ``lo`` and ``hi`` are marks of the same partition with ``lo.index < target <= hi.index``;
        ``hi`` must have a position. With ``slack`` (a share of the take ``target - lo.index``, in
        ``[0, 1)``), a probed entry that ends up to that share of the take short of ``target`` is
        taken as the mark instead (see :func:`slack_floor`): never past ``target``, always past ``lo``.
        """
        if not lo.index < target <= hi.index or hi.position is None:
            raise PulsarError(f"cannot locate index {target} of {tp} between {lo} and {hi}")
        if target == hi.index:
            return hi
        floor = slack_floor(lo.index, target, slack)
        table = self._kept_table(tp, hi.position)
        if table is not None:
            try:
                return self._search(tp, table, lo, hi, target, floor=floor)
            except PulsarError:  # the kept list is stale (data deleted, topic recreated): list again
                pass
        table = _EntryTable(self.ledgers(tp))
        with self._lock:
            self._tables[tp] = table
        return self._search(tp, table, lo, hi, target, floor=floor)

    def forget(self, parts: Iterable[TopicPartition]) -> None:
        """Drop the kept ledger lists of partitions that are gone (deleted, or no longer selected)."""
        with self._lock:
            for tp in parts:
                self._tables.pop(tp, None)

    def locate_all(
        self, asks: Sequence[tuple[TopicPartition, Mark, Mark, int]], slack: float = 0.0
    ) -> list[Mark]:
        """:meth:`locate` of many partitions (``(tp, lo, hi, target)`` each, the same ``slack`` for
        all), their searches run side by side: each round's probes go out pipelined
        (:mod:`widehouse.pulsar.bulk`), one per search still running. A search whose partition has no
        kept ledger list, or whose probe is not answered as expected (an error, a refusal, a stale
        list), is done again by :meth:`locate`, which lists the ledgers and explains any error."""
        found: dict[int, Mark] = {}
        self._list_pipelined(self._unlisted(asks))
        running = self._start_searches(asks, found, slack)
        while len(running) > 1 and self._pipelined_round(running, found):
            pass
        left = sorted(running)  # the last one, or all when nothing can go pipelined (e.g. TLS)

        def finish(i: int) -> Mark | None:
            try:
                return self._drive(*running[i])
            except PulsarError:
                return None

        for i, mark in zip(left, self.map(finish, left), strict=True):
            if mark is not None:
                found[i] = mark
        rest = [i for i in range(len(asks)) if i not in found]
        found.update(zip(rest, self.map(lambda i: self.locate(*asks[i], slack), rest), strict=True))
        return [found[i] for i in range(len(asks))]

    def _unlisted(self, asks: Sequence[tuple[TopicPartition, Mark, Mark, int]]) -> list[TopicPartition]:
        """The asked partitions whose searches need a ledger list first: none kept (a query's
        first batch), or one that ends before the slice's end (a ledger rolled over since)."""
        out: dict[TopicPartition, None] = {}
        for tp, lo, hi, target in asks:
            if not lo.index < target < hi.index or hi.position is None:
                continue  # answered without a search (or an error locate raises)
            if self._kept_table(tp, hi.position) is None:
                out[tp] = None
        return list(out)

    def _kept_table(self, tp: TopicPartition, position: Position) -> _EntryTable | None:
        """The partition's kept ledger list if it reaches ``position``, else None (none kept yet, or
        a ledger rolled over since it was listed)."""
        with self._lock:
            table = self._tables.get(tp)
        return table if table is not None and table.holds(position) else None

    def _start_searches(
        self, asks: Sequence[tuple[TopicPartition, Mark, Mark, int]], found: dict[int, Mark], slack: float
    ) -> dict[int, _Running]:
        """The searches :meth:`locate_all` can run on kept ledger lists, at their first probe (those
        answered without a probe go to ``found``; the others are left to :meth:`locate`)."""
        running: dict[int, _Running] = {}
        for i, (tp, lo, hi, target) in enumerate(asks):
            if not lo.index < target <= hi.index or hi.position is None:
                continue  # locate raises the error
            if target == hi.index:
                found[i] = hi
                continue
            table = self._kept_table(tp, hi.position)
            if table is None:
                continue
            search = self._probes(tp, table, lo, hi, target, floor=slack_floor(lo.index, target, slack))
            try:
                running[i] = (tp, search, next(search))
            except StopIteration as done:
                found[i] = done.value
            except PulsarError:
                continue
        return running

    def _pipelined_round(self, running: dict[int, _Running], found: dict[int, Mark]) -> bool:
        """Every running search's next probe, sent pipelined; False when they cannot go that way.
        A search whose probe is answered otherwise than with its entry leaves ``running``."""
        order = sorted(running)
        answers = self.admin().pipelined(
            [entry_request(running[i][0].name, *running[i][2]) for i in order], self.concurrency
        )
        if answers is None:
            return False
        for i, answer in zip(order, answers, strict=True):
            tp, search, _probe = running.pop(i)
            if not isinstance(answer, bulk.Answer) or answer.status != 200:
                continue
            try:
                running[i] = (tp, search, search.send(entry_from_headers(tp.name, answer.headers)))
            except StopIteration as done:
                found[i] = done.value
            except PulsarError:
                continue
        return True

    def _search(
        self, tp: TopicPartition, table: _EntryTable, lo: Mark, hi: Mark, target: int, *, floor: int
    ) -> Mark:
        """:meth:`locate` over the entries ``table`` numbers (``hi`` has a position), one probe at a time."""
        search = self._probes(tp, table, lo, hi, target, floor=floor)
        try:
            probe = next(search)
        except StopIteration as done:
            mark: Mark = done.value
            return mark
        return self._drive(tp, search, probe)

    def _drive(self, tp: TopicPartition, search: _Probes, probe: tuple[int, int]) -> Mark:
        """Run ``search`` to its end from ``probe``, one admin-client call per probe."""
        try:
            while True:
                probe = search.send(self.admin().entry_info(tp.name, *probe))
        except StopIteration as done:
            mark: Mark = done.value
            return mark

    def _probes(
        self, tp: TopicPartition, table: _EntryTable, lo: Mark, hi: Mark, target: int, *, floor: int
    ) -> _Probes:
        """The search of :meth:`_search`: yields each probe's ``(ledger, entry)``, is sent the entry
        found there, returns the mark; raises :class:`PulsarError` if the index is not there.

        A probe whose entry holds ``target``, or starts right after it, gives the exact mark; one
        that ends in ``[floor, target)`` (``lo.index < floor``) gives the mark of that whole entry.
        Interpolation aims at the middle of ``[floor, target]``: a probe that lands on the entry
        holding that message ends the search, and so may one an entry either side of it.
        ``floor == target`` is the exact search."""
        assert hi.position is not None
        assert lo.index < floor <= target
        if lo.position is None:
            o_lo, i_lo = -1, lo.index
        else:
            o = table.ordinal(lo.position, tp)
            o_lo, i_lo = (
                (o - 1, lo.index - lo.position.batch - 1) if lo.position.batch >= 0 else (o, lo.index)
            )
        o_hi, i_hi = table.ordinal(hi.position, tp), hi.index
        aim = (floor + target + 1) // 2  # the middle of the window: a probe near it lands inside
        for step in range(_MAX_PROBES):
            if o_hi <= o_lo or i_hi <= i_lo:
                break
            if step < 2 or step % 2 == 1:
                # interpolate on the index: twice first (the second, on the range the first narrowed,
                # seldom misses), then every other probe, bisecting between them to bound the worst case
                guess = o_lo + -(-(aim - i_lo) * (o_hi - o_lo) // (i_hi - i_lo))
            else:
                guess = (o_lo + o_hi + 1) // 2
            guess = min(max(guess, o_lo + 1), o_hi)
            ledger, entry = table.position(guess)
            info = yield ledger, entry
            if info.first_index <= target <= info.index:
                batch = -1 if target == info.index else target - info.first_index
                return Mark(Position(ledger, entry, batch), target)
            if floor <= info.index < target:  # ends short of the target, within the slack
                return Mark(Position(ledger, entry), info.index)
            if info.first_index == target + 1:  # the entry before this one ends at the target
                before_ledger, before_entry = table.position(guess - 1)
                return Mark(Position(before_ledger, before_entry), target)
            if info.index < target:
                o_lo, i_lo = guess, info.index
            else:
                o_hi, i_hi = guess - 1, info.first_index - 1
        raise PulsarError(
            f"index {target} of {tp} not found between {lo.encode_position()} and "
            f"{hi.encode_position()}: data was deleted or the topic was recreated"
        )

    def mark_before(self, tp: TopicPartition, position: Position) -> Mark:
        """The mark of having consumed everything before the message at ``position``
        (a whole-entry position means the entry's first message)."""
        try:
            info = self.admin().entry_info(tp.name, position.ledger, position.entry)
        except PulsarError as exc:
            raise PulsarError(f"message {position} of {tp} does not exist: {exc}") from exc
        batch = max(position.batch, 0)
        if batch >= info.messages:
            raise PulsarError(f"message {position} of {tp}: the entry holds {info.messages} messages")
        index = info.first_index + batch
        if batch > 0:
            return Mark(Position(position.ledger, position.entry, batch - 1), index - 1)
        if position.entry > 0:
            return Mark(Position(position.ledger, position.entry - 1), index - 1)
        previous = [(lid, n) for lid, n in self.ledgers(tp) if lid < position.ledger and n > 0]
        if previous:
            lid, n = previous[-1]
            return Mark(Position(lid, n - 1), index - 1)
        return Mark(None, index - 1)


def ledger_list(stats: dict[str, Any]) -> list[tuple[int, int]]:
    """``(ledger id, entries)`` from a partition's internal stats, oldest first; the ledger being
    written counts up to the last confirmed entry."""
    ledgers = [(int(x["ledgerId"]), int(x.get("entries", 0))) for x in stats.get("ledgers", [])]
    last = str(stats.get("lastConfirmedEntry", ""))
    if ":" in last:
        ledger_id, entry_id = (int(x) for x in last.split(":")[:2])
        ledgers = [(lid, entry_id + 1 if lid == ledger_id else n) for lid, n in ledgers]
    return ledgers


def slack_floor(start: int, target: int, slack: float) -> int:
    """The lowest index a cut at ``target`` after ``start`` may end at with ``slack``: ``target``
    less ``slack`` of the take, rounded down, and always past ``start`` (``slack`` in ``[0, 1)``)."""
    if not 0.0 <= slack < 1.0:
        raise ValueError(f"slack {slack!r} must be in [0, 1)")
    return max(start + 1, target - int((target - start) * slack))


class _EntryTable:
    """Entries of a partition numbered 0.. across its ledgers, for interpolation."""

    def __init__(self, ledgers: list[tuple[int, int]]) -> None:
        self.ids = [lid for lid, _ in ledgers]
        self.counts = [n for _, n in ledgers]
        self.bases: list[int] = []
        total = 0
        for n in self.counts:
            self.bases.append(total)
            total += n
        self.total = total

    def _slot(self, ledger: int) -> int | None:
        """The ledger's place in the list, None if it is not listed."""
        try:
            return self.ids.index(ledger)
        except ValueError:
            return None

    def holds(self, position: Position) -> bool:
        """Whether the entry at ``position`` is numbered here: in a ledger listed before the last
        (closed: its count is final) or within the last one's count when listed."""
        i = self._slot(position.ledger)
        return i is not None and (i < len(self.ids) - 1 or position.entry < self.counts[i])

    def ordinal(self, position: Position, tp: TopicPartition) -> int:
        i = self._slot(position.ledger)
        if i is None:
            raise PulsarError(
                f"ledger {position.ledger} of {tp} no longer exists (data deleted by retention, or the "
                "topic was recreated)"
            )
        return self.bases[i] + position.entry

    def position(self, ordinal: int) -> tuple[int, int]:
        # the last ledger starting at or before the ordinal (an empty ledger shares its base with
        # the next one, and bisect_right skips past it)
        i = bisect.bisect_right(self.bases, ordinal) - 1
        return self.ids[i], ordinal - self.bases[i]

"""One publisher per (table, period) at a time: a lease in ClickHouse.

ClickHouse has no compare-and-set, but its insert deduplication is one: a block inserted with an
``insert_deduplication_token`` the table has already seen is dropped, atomically with the check
(the parts lock of a MergeTree; the block-id node in Keeper for a ReplicatedMergeTree). A lease is
a *generation* of a (table, period): to take it, a publisher inserts a ``claim`` row for the next
generation with the token ``lease:<table>:<period>:<generation>``; of any number of concurrent
claims exactly one row is stored, and reading it back tells everybody who won. (A rule like "the
earliest server timestamp wins" is not enough: a claim stamped earlier can become visible after a
later claim's reader decided.)

A generation stays held until its holder releases it (a ``release`` row), or it expires
(``expires_at``, server time; the holder pushes it with ``renew`` rows), or its holder is a dead
process on this host (``host`` + ``pid``: a SIGKILLed job's lease is taken over at once). The next
claim is then the next generation. A loser gets :class:`PeriodBusyError` naming the holder, after
waiting ``wait`` seconds for it to finish.

On one server the check is the table's ``non_replicated_deduplication_window``. On a ClickHouse
cluster the table is one replicated table with a copy on every node, so the token check is Keeper's
(the block id is created in the same Keeper transaction as the part: two claims of a generation
sent to two replicas still store one row); claims, renewals and releases are quorum inserts and
every read of the table is sequentially consistent (:mod:`widehouse.clickhouse.client`): a reader
on a lagging replica gets an error (retried), never a stale "free" lease. A holder that lost its
lease (expired while it still ran) is fenced further by the publish protocol (:mod:`.publish`):
Delta skips a commit whose txnVersion is older than the period's newest, and the ledger shows the
newest ``finalized_at``.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from widehouse.contracts.periods import sql_time
from widehouse.contracts.tables import LEASE_SHAPE, LEASES
from widehouse.errors import BatchError

if TYPE_CHECKING:
    from widehouse.clickhouse import ClickHouse

log = logging.getLogger(__name__)

DEFAULT_TTL = dt.timedelta(minutes=30)
POLL_SECONDS = 0.5


class PeriodBusyError(BatchError):
    """Another run holds the (table, period): it publishes that period right now."""


@dataclass(frozen=True)
class Holding:
    """The newest generation of a (table, period) as the ledger sees it."""

    generation: int
    holder: str
    host: str
    pid: int
    expires_at: dt.datetime
    released: bool

    def live(self, now: dt.datetime) -> bool:
        if self.released or self.expires_at <= now:
            return False
        return not (self.host == socket.gethostname() and not _alive(self.pid))


@dataclass
class Lease:
    """A held lease; :meth:`release` it when done (a ``with`` block does)."""

    client: ClickHouse
    table: str
    period: dt.datetime
    holder: str
    generation: int
    ttl: dt.timedelta = DEFAULT_TTL
    renewals: int = field(default=0)
    released: bool = field(default=False)

    def check(self) -> None:
        """Raise :class:`PeriodBusyError` unless this lease is still held (live, not taken over)."""
        state, now = _state(self.client, self.table, self.period)
        if state is None or state.generation != self.generation or not state.live(now):
            raise PeriodBusyError(
                f"{_what(self.table, self.period)}: run {self.holder} lost its publish lease "
                f"(generation {self.generation}; now {_describe(state)}); nothing more is published by it"
            )

    def renew(self) -> None:
        """Check the lease and push its expiry ``ttl`` past the server's now."""
        self.check()
        self.renewals += 1
        _insert(self.client, self, "renew", f"lease-renew:{self._key()}:{self.generation}:{self.renewals}")

    def release(self) -> None:
        if self.released:
            return
        self.released = True
        try:
            _insert(self.client, self, "release", f"lease-release:{self._key()}:{self.generation}")
        except Exception as exc:  # the lease then expires by itself (or is taken over when we are gone)
            log.warning("could not release the lease of %s: %s", _what(self.table, self.period), exc)

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release()

    def _key(self) -> str:
        return f"{self.table}:{self.period.isoformat()}"


def ensure(client: ClickHouse) -> None:
    client.ensure_shapes([LEASE_SHAPE])


def acquire(
    client: ClickHouse,
    table: str,
    period: dt.datetime,
    holder: str,
    *,
    wait: float = 0.0,
    ttl: dt.timedelta = DEFAULT_TTL,
) -> Lease:
    """Take the publish lease of (``table``, ``period``) for ``holder`` (a run id).

    Waits up to ``wait`` seconds while another live holder has it, then raises
    :class:`PeriodBusyError` naming that holder. Re-entrant for the same holder."""
    period = period.astimezone(dt.UTC)
    deadline = time.monotonic() + wait
    while True:
        state, now = _state(client, table, period)
        if state is not None and state.live(now):
            if state.holder == holder:
                return Lease(client, table, period, holder, state.generation, ttl)
            if time.monotonic() >= deadline:
                raise PeriodBusyError(
                    f"{_what(table, period)} is being published by run {state.holder} "
                    f"({state.host} pid {state.pid}, lease until {state.expires_at.isoformat()}); "
                    "try again when it is done"
                )
            time.sleep(POLL_SECONDS)
            continue
        generation = (state.generation if state else 0) + 1
        lease = Lease(client, table, period, holder, generation, ttl)
        key = lease._key()
        _insert(client, lease, "claim", f"lease:{key}:{generation}")
        won = _claim_holder(client, table, period, generation)
        if won == holder:
            if state is not None and not state.released:
                log.warning(
                    "%s: took over the lease of run %s (%s)",
                    _what(table, period),
                    state.holder,
                    _describe(state),
                )
            return lease
        # another claim of this generation got in first: loop and wait for (or report) it


def _what(table: str, period: dt.datetime) -> str:
    return f"period {period:%Y-%m-%dT%H:%M}Z of {table}"


def _describe(state: Holding | None) -> str:
    if state is None:
        return "no lease"
    status = "released" if state.released else f"until {state.expires_at.isoformat()}"
    return f"generation {state.generation} held by {state.holder} on {state.host} pid {state.pid}, {status}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def _server_now(client: ClickHouse) -> dt.datetime:
    return _utc(client.scalar("SELECT now64(3, 'UTC')"))


def _insert(client: ClickHouse, lease: Lease, event: str, token: str) -> None:
    import pyarrow as pa

    now = _server_now(client)
    row: dict[str, Any] = {
        "table": lease.table,
        "period": lease.period,
        "generation": lease.generation,
        "event": event,
        "holder": lease.holder,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "at": now,
        "expires_at": now if event == "release" else now + lease.ttl,
    }
    client.insert(LEASES, pa.Table.from_pylist([row], schema=LEASE_SHAPE.arrow_schema()), token)


_WHERE = "`table` = {t:String} AND period = {p:DateTime64(3, 'UTC')}"


def _claim_holder(client: ClickHouse, table: str, period: dt.datetime, generation: int) -> str:
    return str(
        client.scalar(
            f"SELECT holder FROM {LEASES} WHERE {_WHERE} AND generation = {{g:UInt64}} "
            "AND event = 'claim' LIMIT 1",
            {"t": table, "p": sql_time(period), "g": generation},
            consistent=True,
        )
    )


def _state(client: ClickHouse, table: str, period: dt.datetime) -> tuple[Holding | None, dt.datetime]:
    """The newest generation of (table, period) and the server's now."""
    rows = client.rows(
        "WITH (SELECT max(generation) FROM "
        f"{LEASES} WHERE {_WHERE} AND event = 'claim') AS g, "
        f"(SELECT any(holder) FROM {LEASES} WHERE {_WHERE} AND generation = g AND event = 'claim') AS h "
        "SELECT g, h, argMaxIf(host, at, event = 'claim'), argMaxIf(pid, at, event = 'claim'), "
        "maxIf(expires_at, event != 'release'), countIf(event = 'release') > 0, now64(3, 'UTC') "
        f"FROM {LEASES} WHERE {_WHERE} AND generation = g AND holder = h",
        {"t": table, "p": sql_time(period)},
        consistent=True,
    )
    now = _server_now(client) if not rows else _utc(rows[0][6])
    if not rows or not rows[0][1]:
        return None, now
    generation, holder, host, pid, expires, released, _ = rows[0]
    return Holding(int(generation), str(holder), str(host), int(pid), _utc(expires), bool(released)), now


def _utc(value: dt.datetime) -> dt.datetime:
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


__all__ = ["DEFAULT_TTL", "Lease", "PeriodBusyError", "acquire", "ensure"]

"""Repair: quarantined events re-parsed with the current catalog and folded back into a wide table.

When the catalog was wrong (a field's type too strict, a missing mapping) the stream quarantined
valid events with their payloads. After the catalog is fixed, :func:`repair` takes the quarantined
messages of a wide table's topics published in a range of hours, re-parses them with the current
catalog (the stream's own transform: same parse, filters and aggregates), folds the ones that are
now valid into the table's partials, records every outcome, and re-publishes the periods it
touched. Steps, each safe to repeat:

0. **Lease**: one repair per table at a time (the publish lease of (``repair:<T>``, epoch)), renewed
   before each chunk is claimed and written (a run whose lease expired stops there).
1. **Finish what a crashed repair left**: a chunk with ``repairs`` rows and no ``repair_chunks`` row
   is folded again from its recorded messages and written with the same identity (below).
2. **Chunks**: candidates = the range's quarantined messages (one row per message id, the merge's
   overflow rows excluded) that are not ``repaired`` for the table, in (topic, message id) order,
   ``chunk_size`` at a time. Each is re-parsed with its original publish time; an event the
   catalog now accepts but calls *late* (event time more than the lateness behind its publish time)
   is folded too, with its event time standing in for the publish time (as ``--include-late``
   does): the operator asked for these events. A payload the stream cut at its 4 KiB limit cannot be
   parsed again and stays quarantined (reason ``truncated``).
   A chunk with repaired events gets the table's next chunk number ``n`` and is written in order:
   the claim (``repairs`` rows, outcome ``repaired``, chunk ``n``), the partial rows into
   ``<T>_partial`` (deduplication token ``repair:<T>:<n>``), the same rows appended to Delta
   ``bronze/<T>_partials`` (``txnAppId`` ``widehouse-repair:<T>``, version ``n``), then the done
   rows (``repair_chunks``: per hour touched, the partial rows added). Events still invalid get an
   ``invalid`` row with their new reason and detail, only when that differs from their last one (a
   second run records nothing new).
3. **Re-publish**: every published period of the table that a done chunk touched after its newest
   publication is finalized again (the hourly finalize, or the daily merge for a day table) with
   the flags of that publication (forced, late events, an accepted mismatch); the reconciliation
   counts repaired events as valid (:mod:`widehouse.batch.reconcile`). Periods not published yet
   are left to the normal runs, which read the partials anyway.

So a re-run, or a run after a crash at any point, changes nothing more: the claimed messages are no
longer candidates, a cut-short chunk is rewritten under its own token and Delta transaction, and
re-publishing is decided by the ledger, not by what this run did. (The ClickHouse token guards only
within the partial table's deduplication window, like the stream's own inserts: a crashed repair
should be re-run before a very large number of other inserts into the table.)
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from widehouse.batch import ledger
from widehouse.batch.finalize import fault_killer
from widehouse.batch.late import fold_stored, table_plan
from widehouse.batch.lease import acquire
from widehouse.catalog import QUARANTINE_REASONS
from widehouse.contracts.periods import HOUR, as_hour, hour_text
from widehouse.contracts.tables import REPAIRED, STILL_INVALID
from widehouse.errors import BatchError, ConfigError
from widehouse.repair import store
from widehouse.stream.tables import ensure_clickhouse

if TYPE_CHECKING:
    import pyarrow as pa

    from widehouse.catalog import Catalog
    from widehouse.clickhouse import ClickHouse
    from widehouse.stream.plan import TransformPlan

log = logging.getLogger(__name__)

TRUNCATED = "truncated"
"""The reason of a message that stays quarantined because the stream kept only part of its payload."""
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
DEFAULT_CHUNK = 50_000
"""Messages per chunk: at most ~200 MB of payloads (4 KiB each at worst); 1M messages repair in
~37 s with it, ~58 s with 20,000 (each page re-scans the range's keys: fewer pages, less of it)."""
FAULT_POINTS = ("after-claim", "after-partials", "after-delta", "after-chunk")


@dataclass(frozen=True)
class RepairRequest:
    table: str
    first_hour: dt.datetime
    last_hour: dt.datetime
    """Inclusive: messages published in ``[first_hour, last_hour + 1 h)``."""
    topics: tuple[str, ...] = ()
    """Only these topics of the table (empty: all of them)."""
    reasons: tuple[str, ...] = ()
    """Only messages the stream quarantined with these reasons (empty: any)."""
    chunk_size: int = DEFAULT_CHUNK
    republish: bool = True
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    faults: tuple[str, ...] = ()
    """Testing aid: steps (:data:`FAULT_POINTS`) at which the process kills itself."""


@dataclass(frozen=True)
class RepairContext:
    """What a repair talks to (plain objects; the job builds them from settings)."""

    client: ClickHouse
    catalog: Catalog
    bronze: Callable[[pa.Table, int], None] | None
    """Appends a chunk's partial rows to the table's Delta partials as chunk ``n`` (None: no Delta)."""
    republish: Callable[[dt.datetime], str] | None
    """Publishes one period of the table again; returns a one-line summary (raises BatchError)."""


@dataclass
class RepairOutcome:
    table: str
    examined: int = 0
    repaired: int = 0
    still_invalid: dict[str, int] = field(default_factory=dict)
    """New reason -> messages that stay quarantined (recorded or unchanged)."""
    chunks: list[int] = field(default_factory=list)
    redone: list[int] = field(default_factory=list)
    """Chunks a crashed repair left half-written, finished by this run."""
    republished: list[str] = field(default_factory=list)
    failed: list[tuple[dt.datetime, BatchError]] = field(default_factory=list)

    def summary(self) -> str:
        invalid = sum(self.still_invalid.values())
        lines = [
            f"{self.table}: {self.examined} quarantined message(s) examined, {self.repaired} repaired "
            f"(chunks {', '.join(map(str, self.chunks)) or 'none'}), {invalid} still invalid"
        ]
        if self.still_invalid:
            reasons = ", ".join(f"{r} {n}" for r, n in sorted(self.still_invalid.items()))
            lines.append(f"  still quarantined by reason: {reasons}")
        if self.redone:
            lines.append(f"  finished chunk(s) a crashed repair left: {', '.join(map(str, self.redone))}")
        lines += [f"  re-published: {line}" for line in self.republished]
        lines += [f"  NOT re-published {hour_text(h)}: {e}" for h, e in self.failed]
        if not self.republished and not self.failed:
            lines.append("  no published period needed re-publishing")
        return "\n".join(lines)


def check_request(catalog: Catalog, request: RepairRequest) -> tuple[str, ...]:
    """The request's topics (all of the table's when none are named); ConfigError naming what is
    wrong otherwise."""
    table = catalog.table(request.table)
    feeding = tuple(str(t.name) for t in catalog.topics_for(table.name))
    unknown = [t for t in request.topics if t not in feeding]
    if unknown:
        raise ConfigError(
            f"--topic {unknown[0]!r} does not feed {table.name} (its topics: {', '.join(feeding)})"
        )
    bad = [r for r in request.reasons if r not in QUARANTINE_REASONS]
    if bad:
        raise ConfigError(f"--reason {bad[0]!r} is not a quarantine reason ({', '.join(QUARANTINE_REASONS)})")
    if as_hour(request.last_hour) < as_hour(request.first_hour):
        raise ConfigError(
            f"--to {hour_text(request.last_hour)} is before --from {hour_text(request.first_hour)}"
        )
    if request.chunk_size < 1:
        raise ConfigError(f"chunk size {request.chunk_size} must be at least 1")
    unknown_faults = [f for f in request.faults if f not in FAULT_POINTS]
    if unknown_faults:
        raise ConfigError(f"fault {unknown_faults[0]!r} is not one of {', '.join(FAULT_POINTS)}")
    return tuple(request.topics) or feeding


def repair(ctx: RepairContext, request: RepairRequest) -> RepairOutcome:
    """Repair one table's quarantined events (see the module docstring)."""
    topics = check_request(ctx.catalog, request)
    client = ctx.client
    ensure_clickhouse(client, ctx.catalog)
    ledger.ensure(client)  # the batch layer's tables, the repairs' among them
    selection = store.Selection(
        request.table, topics, as_hour(request.first_hour), as_hour(request.last_hour) + HOUR, request.reasons
    )
    writer = _ChunkWriter(ctx, request, table_plan(ctx.catalog, request.table))
    outcome = RepairOutcome(request.table)
    with acquire(client, f"repair:{request.table}", EPOCH, request.run_id) as lease:
        writer.before_chunk = lease.renew  # a run that lost its lease (expired) stops before writing
        for chunk in store.pending_chunks(client, request.table):
            messages = store.chunk_messages(client, request.table, chunk)
            writer.before_chunk()
            writer.write(chunk, writer.fold(messages).partials)
            outcome.redone.append(chunk)
        after: tuple[str, str] | None = None
        while True:
            page = store.candidates(client, selection, after, request.chunk_size)
            if page.num_rows == 0:
                break
            after = (str(page["topic"][-1]), str(page["message_id"][-1]))
            outcome.examined += page.num_rows
            writer.page(page, outcome)
        if request.republish and ctx.republish is not None:
            _republish(ctx, request, outcome)
    log.info("repair %s: %s", request.table, outcome.summary())
    return outcome


def _republish(ctx: RepairContext, request: RepairRequest, outcome: RepairOutcome) -> None:
    assert ctx.republish is not None
    grain = ctx.catalog.table(request.table).grain
    for period in store.periods_to_republish(ctx.client, request.table, grain):
        try:
            outcome.republished.append(ctx.republish(period))
        except BatchError as exc:  # the next repair (or a manual finalize) re-publishes it
            log.warning("repair %s: re-publishing %s failed: %s", request.table, hour_text(period), exc)
            outcome.failed.append((period, exc))


@dataclass(frozen=True)
class Folded:
    """A page of messages re-parsed: the partial rows of the valid ones, every outcome."""

    partials: pa.Table
    repaired: list[dict[str, Any]]
    invalid: list[dict[str, Any]]


def fold_messages(plan: TransformPlan, table: str, messages: pa.Table) -> Folded:
    """Re-parse stored ``messages`` (topic, message_id, publish_time, payload, payload_bytes) with
    ``plan``: the partial rows of ``table`` from the valid ones (late ones folded at their event
    time), which are repaired, and which stay invalid with which reason."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from widehouse.stream import merge
    from widehouse.stream.plan import KIND_LATE, KIND_QUARANTINE

    whole = pc.equal(pc.binary_length(messages["payload"]), messages["payload_bytes"].cast(pa.int32()))
    complete = messages.filter(whole)
    out = fold_stored(
        plan,
        complete["topic"],
        complete["message_id"],
        complete["payload"],
        complete["publish_time"],
    )
    late = out.filter(pc.equal(out["wh_kind"], KIND_LATE))
    outs = [out]
    if late.num_rows:  # valid now, but late for its publish time: folded at its event time
        payloads = dict(
            zip(_keys(complete, "topic", "message_id"), complete["payload"].to_pylist(), strict=True)
        )
        keys = _keys(late, "wh_topic", "wh_message_id")
        outs.append(
            fold_stored(
                plan,
                late["wh_topic"],
                late["wh_message_id"],
                pa.array([payloads[k] for k in keys], pa.binary()),
                late["wh_event_time"],
            )
        )
    rejected = out.filter(pc.equal(out["wh_kind"], KIND_QUARANTINE))
    invalid_keys = set(_keys(rejected, "wh_topic", "wh_message_id"))
    times = dict(
        zip(_keys(messages, "topic", "message_id"), messages["publish_time"].to_pylist(), strict=True)
    )
    repaired = [
        {"topic": t, "message_id": m, "publish_time": times[(t, m)]}
        for t, m in _keys(complete, "topic", "message_id")
        if (t, m) not in invalid_keys
    ]
    invalid = [
        {
            "topic": r["wh_topic"],
            "message_id": r["wh_message_id"],
            "publish_time": times[(r["wh_topic"], r["wh_message_id"])],
            "reason": r["wh_reason"],
            "detail": r["wh_detail"] or "",
        }
        for r in rejected.select(["wh_topic", "wh_message_id", "wh_reason", "wh_detail"]).to_pylist()
    ]
    cut = messages.filter(pc.invert(whole))
    invalid += [
        {
            "topic": r["topic"],
            "message_id": r["message_id"],
            "publish_time": r["publish_time"],
            "reason": TRUNCATED,
            "detail": f"the stream kept {len(r['payload'] or b'')} of {r['payload_bytes']} bytes",
        }
        for r in cut.select(["topic", "message_id", "publish_time", "payload", "payload_bytes"]).to_pylist()
    ]
    partials = merge.partials(pa.concat_tables(outs), plan, table)
    return Folded(partials, repaired, invalid)


class _ChunkWriter:
    def __init__(self, ctx: RepairContext, request: RepairRequest, plan: TransformPlan) -> None:
        self.ctx = ctx
        self.request = request
        self.plan = plan
        self.table = request.table
        self.step = fault_killer(request.faults)
        self.before_chunk: Callable[[], None] = lambda: None

    def fold(self, messages: pa.Table) -> Folded:
        return fold_messages(self.plan, self.table, messages)

    def page(self, page: pa.Table, outcome: RepairOutcome) -> None:
        """One page of candidates: claim, write and finish its chunk; record what stays invalid."""
        client = self.ctx.client
        folded = self.fold(page)
        now = store.server_now(client)
        if folded.repaired:
            self.before_chunk()
            chunk = store.last_chunk(client, self.table) + 1
            rows = [
                self._row(r, REPAIRED, reason="", detail="", chunk=chunk, now=now) for r in folded.repaired
            ]
            store.record_outcomes(client, rows, f"repair:{self.table}:{chunk}:claim")
            self.step("after-claim")
            self.write(chunk, folded.partials)
            outcome.chunks.append(chunk)
            outcome.repaired += len(folded.repaired)
        previous = store.last_outcomes(
            client, self.table, [(r["topic"], r["message_id"]) for r in folded.invalid]
        )
        changed = []
        for r in folded.invalid:
            outcome.still_invalid[r["reason"]] = outcome.still_invalid.get(r["reason"], 0) + 1
            if previous.get((r["topic"], r["message_id"])) != f"{r['reason']}|{r['detail']}":
                changed.append(
                    self._row(r, STILL_INVALID, reason=r["reason"], detail=r["detail"], chunk=0, now=now)
                )
        first = page["message_id"][0]
        store.record_outcomes(client, changed, f"repair:{self.table}:{self.request.run_id}:invalid:{first}")

    def write(self, chunk: int, partials: pa.Table) -> None:
        """A claimed chunk's partial rows into both stores, then its done rows (idempotent). The
        caller renewed the lease just before (``before_chunk``)."""
        from widehouse.clickhouse.ddl import table_names

        client = self.ctx.client
        partial = table_names(self.ctx.catalog.table(self.table)).partial
        client.insert(partial, partials, f"repair:{self.table}:{chunk}")
        self.step("after-partials")
        if self.ctx.bronze is not None and partials.num_rows:
            self.ctx.bronze(partials, chunk)
        self.step("after-delta")
        done_at = store.server_now(client)
        per_hour = partials.group_by("hour").aggregate([("hour", "count")]) if partials.num_rows else None
        rows = [
            {
                "table": self.table,
                "chunk": chunk,
                "hour": h,
                "rows": n,
                "run_id": self.request.run_id,
                "done_at": done_at,
            }
            for h, n in (
                zip(per_hour["hour"].to_pylist(), per_hour["hour_count"].to_pylist(), strict=True)
                if per_hour is not None
                else [(EPOCH, 0)]
            )
        ]
        store.record_done(client, rows, f"repair:{self.table}:{chunk}:done")
        self.step("after-chunk")

    def _row(
        self, message: dict[str, Any], outcome: str, *, reason: str, detail: str, chunk: int, now: dt.datetime
    ) -> dict[str, Any]:
        return {
            "table": self.table,
            "topic": message["topic"],
            "message_id": message["message_id"],
            "publish_time": message["publish_time"],
            "outcome": outcome,
            "reason": reason,
            "detail": detail,
            "chunk": chunk,
            "run_id": self.request.run_id,
            "at": now,
        }


def _keys(rows: pa.Table, topic: str, message_id: str) -> list[tuple[str, str]]:
    """(topic, message id) of each row: message ids are unique within a topic only."""
    return list(zip(rows[topic].to_pylist(), rows[message_id].to_pylist(), strict=True))


__all__ = [
    "FAULT_POINTS",
    "TRUNCATED",
    "RepairContext",
    "RepairOutcome",
    "RepairRequest",
    "check_request",
    "repair",
]

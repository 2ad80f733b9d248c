"""Finalize an hour of an hourly wide table: gate, reconcile, (fold late events,) publish, refresh
the day's HBase stream family.

Steps, each safe to repeat (a re-run, or a run after a crash at any point, ends with the same
rows; only ``finalized_at`` and the run id differ):

0. **Lease and recovery**: the run takes the (table, hour) publish lease (:mod:`.lease`; another
   run publishing the hour: :class:`~widehouse.batch.lease.PeriodBusyError`), then rolls forward a
   publication a crashed run prepared (:func:`.publish.recover`), before anything below can stop it.
1. **Gate** (:mod:`.gate`): every feeding group's watermark past hour end + lateness, or
   ``force`` (recorded in the ledger with the lagging groups).
2. **Reconcile** (:mod:`.reconcile`): rows in ``reconciliation``; a mismatch stops the run unless
   ``accept_mismatch`` (then recorded as ``accepted``).
3. **Late events** with ``include_late``: folded into scratch partials (:mod:`.late`) that join
   the hour's partials for this run only; the ledger records how many.
4. **Publish** (:mod:`.publish`): the final rows computed by ClickHouse straight into
   ``<T>_final`` (``INSERT ... SELECT``, nothing through Python), prepared, the staged rows
   streamed to Delta ``silver/<T>`` (delta-rs), then the ledger row (the visible switch in
   ClickHouse).
5. **HBase**: the day's stream family ``s`` refreshed (``refresh_day``, given by the caller, which
   takes the daily table's lease for the day: it never interleaves with the daily merge).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import signal
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from widehouse.batch import ledger
from widehouse.batch.final_rows import final_hour_select
from widehouse.batch.gate import Gate, check
from widehouse.batch.late import LatePartials, late_partials
from widehouse.batch.lease import acquire
from widehouse.batch.publish import PublishResult, RunInfo, SilverWriter, publish, recover
from widehouse.batch.reconcile import Reconciliation, reconcile
from widehouse.clickhouse.analyst import ensure_analyst_views
from widehouse.clickhouse.ddl import q, scratch_table_ddl, table_names
from widehouse.contracts.periods import as_hour, hour_text
from widehouse.contracts.tables import RECONCILIATION_SHAPE
from widehouse.errors import ConfigError, NotReadyError, ReconciliationError
from widehouse.stream.tables import ensure_clickhouse

if TYPE_CHECKING:
    from pathlib import Path

    from widehouse.batch.lease import Lease
    from widehouse.catalog import Catalog, WideTable
    from widehouse.clickhouse import ClickHouse
    from widehouse.pulsar.admin import PulsarAdmin

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FinalizeRequest:
    table: str
    hour: dt.datetime
    force: bool = False
    include_late: bool = False
    accept_mismatch: bool = False
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    lease_wait: float = 0.0
    """Seconds to wait for another run publishing the same hour before giving up (PeriodBusyError)."""
    airflow_run: str = ""
    """The Airflow DAG run that runs this finalize (``--airflow-run``), recorded in the ledger."""
    faults: tuple[str, ...] = ()
    """Testing aid: publish steps (``after-final``, ``after-prepare``, ``after-silver``) at which the
    process kills itself."""


@dataclass(frozen=True)
class FinalizeOutcome:
    gate: Gate
    reconciliation: Reconciliation
    published: PublishResult
    late: LatePartials | None = None
    hbase_rows: int | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    """Wall time per step (ensure tables, lease and recovery, gate, reconcile, late events, publish (the
    final rows computed into ClickHouse, Delta, ledger), hbase)."""
    recovered: PublishResult | None = None
    """A crashed run's prepared publication this run rolled forward first."""

    def summary(self) -> str:
        lines = []
        if self.recovered is not None:
            lines.append(
                f"rolled forward a prepared publication first (finalized_at "
                f"{self.recovered.finalized_at.isoformat()}, {self.recovered.rows} row(s))"
            )
        lines += [
            f"{self.published.table} {hour_text(self.published.period)}: {self.published.rows} final row(s) "
            f"published (finalized_at {self.published.finalized_at.isoformat()})",
            f"  gate: {self.gate.message}",
            "  reconciliation: " + self.reconciliation.summary().replace("\n", "\n  "),
        ]
        if self.late is not None:
            lines.append(
                f"  late events folded: {self.late.events} (truncated, not folded: {self.late.truncated}; "
                f"rejected: {self.late.rejected})"
            )
        if self.hbase_rows is not None:
            lines.append(f"  HBase day rows refreshed (family s): {self.hbase_rows}")
        return "\n".join(lines)


@dataclass(frozen=True)
class BatchContext:
    """What a batch job talks to (plain objects; the job builds them from settings)."""

    client: ClickHouse
    admin: PulsarAdmin
    catalog: Catalog
    silver: SilverWriter
    app: str
    plan_path: Path | None = None
    refresh_day: Callable[[dt.date], int] | None = None


def finalize_hour(ctx: BatchContext, request: FinalizeRequest) -> FinalizeOutcome:
    """Finalize one hour (see the module docstring). Raises NotReadyError / ReconciliationError."""
    laps = _Laps()
    table = ctx.catalog.table(request.table)
    if table.grain != "hour":
        raise ConfigError(f"--table {table.name} has grain {table.grain!r}: finalize takes hourly tables")
    hour = as_hour(request.hour)
    ensure_clickhouse(ctx.client, ctx.catalog)
    ledger.ensure(ctx.client)
    ensure_analyst_views(ctx.client, ctx.catalog.sql_dir)

    laps.lap("ensure tables")
    killer = fault_killer(request.faults)
    with acquire(ctx.client, table.name, hour, request.run_id, wait=request.lease_wait) as lease:
        recovered = recover(ctx.client, ctx.silver, table, hour, step=killer)
        laps.lap("lease and recovery")
        result, gate, rec, late = _finalize_leased(ctx, request, table, hour, laps, lease)
    laps.lap("publish")
    refreshed = ctx.refresh_day(hour.date()) if ctx.refresh_day else None
    laps.lap("hbase")
    log.info("finalized %s %s: %s", table.name, hour.isoformat(), laps)
    return FinalizeOutcome(gate, rec, result, late, refreshed, laps.laps, recovered=recovered)


def _finalize_leased(  # noqa: PLR0917 - the run's parts, in order
    ctx: BatchContext,
    request: FinalizeRequest,
    table: WideTable,
    hour: dt.datetime,
    laps: _Laps,
    lease: Lease,
) -> tuple[PublishResult, Gate, Reconciliation, LatePartials | None]:
    """Steps 1-4, under the hour's lease."""
    gate = check(ctx.client, ctx.catalog, table.name, hour, ctx.app, ctx.plan_path)
    laps.lap("gate")
    if not gate.ready and not request.force:
        raise NotReadyError(gate.message + " (use --force to finalize anyway; it is recorded)")

    rec = reconcile(ctx.client, ctx.admin, ctx.catalog, table.name, hour, app=ctx.app)
    checked_at = dt.datetime.now(dt.UTC)
    ledger.record(
        ctx.client,
        rec.rows(request.run_id, request.accept_mismatch, checked_at),
        RECONCILIATION_SHAPE,
        f"reconcile:{table.name}:{hour.isoformat()}:{request.run_id}",
    )
    laps.lap("reconcile")
    if not rec.ok and not request.accept_mismatch:
        raise ReconciliationError(rec.summary() + "\n(nothing published; --accept-mismatch publishes anyway)")

    late = None
    scratch = None
    try:
        if request.include_late:
            late = late_partials(ctx.client, ctx.catalog, table.name, hour, ctx.app)
            if late.rows.num_rows:
                scratch = _scratch_table(ctx.client, table, request.run_id)
                ctx.client.insert(scratch, late.rows, f"late:{scratch}")
        rows = final_hour_select(table, hour, [q(scratch)] if scratch else None)
        laps.lap("late events")
        notes = []
        if not gate.ready:
            notes.append(f"forced: {gate.message}")
        if not rec.ok:
            notes.append(f"mismatch accepted: {rec.summary()}")
        run = RunInfo(
            run_id=request.run_id,
            kind="hour",
            forced=not gate.ready,
            include_late=request.include_late,
            late_rows=late.events if late else 0,
            reconciliation="ok" if rec.ok else "accepted",
            note="\n".join(notes),
            airflow_run=request.airflow_run,
        )
        # the final rows are computed by ClickHouse into <T>_final (the scratch partials still there)
        result = publish(
            ctx.client, ctx.silver, table, hour, rows, run, step=fault_killer(request.faults), lease=lease
        )
    finally:
        if scratch:
            ctx.client.command(f"DROP TABLE IF EXISTS {q(scratch)}")
    return result, gate, rec, late


class _Laps:
    def __init__(self) -> None:
        self.last = time.monotonic()
        self.laps: dict[str, float] = {}

    def lap(self, name: str) -> None:
        now = time.monotonic()
        self.laps[name] = round(now - self.last, 2)
        self.last = now

    def __str__(self) -> str:
        return ", ".join(f"{k} {v:.1f}s" for k, v in self.laps.items())


def fault_killer(faults: tuple[str, ...]) -> Callable[[str], None]:
    """Testing aid: a step function that SIGKILLs this process at the named points."""

    def step(point: str) -> None:
        if point in faults:
            log.warning("fault injected: SIGKILL at %s", point)
            os.kill(os.getpid(), signal.SIGKILL)

    return step


def _scratch_table(client: ClickHouse, table: WideTable, run_id: str) -> str:
    """A run's own table with ``<T>_partial``'s structure, for its late partials (dropped after)."""
    partial = table_names(table).partial
    name = f"{partial}_late_{run_id}"
    client.command(scratch_table_ddl(table, name, cluster=client.cluster))  # not a Distributed copy
    return name


__all__ = ["BatchContext", "FinalizeOutcome", "FinalizeRequest", "fault_killer", "finalize_hour"]

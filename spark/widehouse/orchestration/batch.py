"""The batch layer as Airflow runs it: the hourly gate, finalize, the daily readiness and merge.

The gate, the ledger and the jobs are the batch layer's (:mod:`widehouse.batch`); this module asks
them and maps their answers and exit codes to what a task does: wait, succeed, retry, or fail for
good with a message that says how to re-run.

Finalize exit codes (:mod:`widehouse.batch.jobs`): 0 done, 2 bad input, 3 not ready (watermark),
4 reconciliation mismatch, 5 busy (another run publishes the period: retry), 1 other failure.
Daily: 0 done, 2 bad input (e.g. a missing Hive partition), 5 busy, 1 other failure.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from widehouse.batch.jobs import EXIT_BAD_INPUT, EXIT_BUSY, EXIT_MISMATCH, EXIT_MISSING_INPUT, EXIT_NOT_READY
from widehouse.contracts.periods import as_hour, hour_text
from widehouse.errors import JobFailedError
from widehouse.orchestration.runner import Runner

_BUSY = "busy: another run holds the period's publish lease (one publisher per table and period)"
FINALIZE_MEANING = {
    EXIT_BAD_INPUT: ("bad input", False),
    EXIT_NOT_READY: ("not ready: a slot group's committed watermark is before hour end + lateness", True),
    EXIT_MISMATCH: (
        "reconciliation mismatch: counts differ between the broker, the stream and the tables; inspect "
        "the reconciliation rows, then re-run with accept_mismatch from the manual operations DAG",
        False,
    ),
    EXIT_BUSY: (_BUSY, True),
}
REPAIR_MEANING = {
    EXIT_BAD_INPUT: ("bad input", False),
    EXIT_NOT_READY: (
        "repaired, but a touched hour is not final yet (watermark); the next repair re-publishes it",
        True,
    ),
    EXIT_MISMATCH: (
        "repaired, but re-publishing a touched hour found a reconciliation mismatch; inspect the "
        "reconciliation rows, then re-finalize that hour with accept_mismatch",
        False,
    ),
    EXIT_BUSY: ("busy: another repair of the table runs, or a touched period is being published", True),
}
DAILY_MEANING = {
    EXIT_MISSING_INPUT: ("bad input (e.g. a missing Hive partition for the day)", False),
    EXIT_BUSY: (_BUSY, True),
}


@dataclass(frozen=True)
class GateVerdict:
    ready: bool
    message: str


GateFn = Callable[[Any, Any, str, dt.datetime], Any]
"""``widehouse.batch.gate.hour_gate(settings, catalog, table, hour) -> Gate`` (injectable)."""


def hour_arg(hour: dt.datetime) -> str:
    """The ``--hour`` argument of ``widehouse finalize`` (``YYYY-MM-DDTHH``; Airflow's hours are
    aware, naive means UTC; a time inside an hour is refused)."""
    return hour_text(as_hour(hour, assume_utc=True))


def check_gate(
    settings: Any, catalog: Any, table: str, hour: dt.datetime, gate: GateFn | None = None
) -> GateVerdict:
    """Whether ``table``'s ``hour`` may be finalized: every feeding group's watermark is past it."""
    if gate is None:
        from widehouse.batch.gate import hour_gate  # the batch layer's light gate (no Spark)

        gate = hour_gate
    answer = gate(settings, catalog, table, as_hour(hour, assume_utc=True))
    waiting = {g: w for g, w in answer.groups.items() if w is None or w < answer.needed}
    detail = ", ".join(
        f"{g} at {w.isoformat() if w else 'nothing committed'}" for g, w in sorted(waiting.items())
    )
    message = answer.message or (
        f"{table} {hour_arg(hour)}: needs watermarks past {answer.needed.isoformat()}"
        + (f"; waiting for {detail}" if detail else "")
    )
    return GateVerdict(bool(answer.ready), message)


def finalize_args(
    table: str,
    hour: dt.datetime,
    *,
    force: bool = False,
    include_late: bool = False,
    accept_mismatch: bool = False,
    airflow_run: str = "",
) -> list[str]:
    """``widehouse finalize``'s arguments; ``airflow_run`` (``<dag id>/<run id>``) goes to the ledger."""
    args = ["finalize", "--table", table, "--hour", hour_arg(hour)]
    for flag, on in (
        ("--force", force),
        ("--include-late", include_late),
        ("--accept-mismatch", accept_mismatch),
    ):
        if on:
            args.append(flag)
    return args + _airflow_run_args(airflow_run)


def daily_args(day: dt.date, *, rewrite_stream: bool = False, airflow_run: str = "") -> list[str]:
    """``widehouse daily``'s arguments; ``airflow_run`` (``<dag id>/<run id>``) goes to the ledger."""
    args = ["daily", "--day", day.isoformat(), *(["--rewrite-stream"] if rewrite_stream else [])]
    return args + _airflow_run_args(airflow_run)


def _airflow_run_args(airflow_run: str) -> list[str]:
    return ["--airflow-run", airflow_run] if airflow_run else []


def finalize_job(
    runner: Runner,
    env: Mapping[str, str],
    table: str,
    hour: dt.datetime,
    *,
    force: bool = False,
    include_late: bool = False,
    accept_mismatch: bool = False,
    airflow_run: str = "",
) -> None:
    """Finalize one table-hour; raises :class:`JobFailedError` (retryable or not) on a non-zero exit."""
    args = finalize_args(
        table,
        hour,
        force=force,
        include_late=include_late,
        accept_mismatch=accept_mismatch,
        airflow_run=airflow_run,
    )
    _check(runner(args, env), f"finalize {table} {hour_arg(hour)}", FINALIZE_MEANING)


def repair_args(
    table: str,
    first: dt.datetime,
    last: dt.datetime,
    *,
    topics: list[str] | tuple[str, ...] = (),
    reasons: list[str] | tuple[str, ...] = (),
    republish: bool = True,
    airflow_run: str = "",
) -> list[str]:
    """``widehouse repair``'s arguments; ``airflow_run`` names the run in re-published ledger rows."""
    args = ["repair", "--table", table, "--from", hour_arg(first), "--to", hour_arg(last)]
    for topic in topics:
        args += ["--topic", topic]
    for reason in reasons:
        args += ["--reason", reason]
    return [*args, *([] if republish else ["--no-republish"]), *_airflow_run_args(airflow_run)]


def repair_job(runner: Runner, env: Mapping[str, str], args: list[str]) -> None:
    """Run ``widehouse repair`` (:func:`repair_args`); raises :class:`JobFailedError` on a non-zero exit."""
    _check(runner(args, env), " ".join(args[:3]), REPAIR_MEANING)


def daily_job(
    runner: Runner,
    env: Mapping[str, str],
    day: dt.date,
    *,
    rewrite_stream: bool = False,
    airflow_run: str = "",
) -> None:
    """Merge one day; raises :class:`JobFailedError` (retryable or not) on a non-zero exit."""
    args = daily_args(day, rewrite_stream=rewrite_stream, airflow_run=airflow_run)
    _check(runner(args, env), f"daily {day.isoformat()}", DAILY_MEANING)


def _check(result: Any, what: str, meanings: dict[int, tuple[str, bool]]) -> None:
    if result.code == 0:
        return
    meaning, retryable = meanings.get(result.code, ("failed", True))
    raise JobFailedError(
        f"{what}: exit code {result.code}, {meaning}. Last lines:\n{result.tail}", result.code, retryable
    )


# -- the day --------------------------------------------------------------------------------------


MissingHoursFn = Callable[[Any, str, dt.date], list[dt.datetime]]
"""``widehouse.batch.ledger.missing_hours(client, table, day)`` (injectable)."""


def unfinalized_hours(
    client: Any, hourly_tables: list[str], day: dt.date, missing: MissingHoursFn | None = None
) -> dict[str, list[dt.datetime]]:
    """Per hourly table, the hours of ``day`` not finalized yet (tables with none are absent)."""
    if missing is None:
        from widehouse.batch.ledger import missing_hours  # the batch layer's ledger (no Spark)

        missing = missing_hours
    found = {table: missing(client, table, day) for table in hourly_tables}
    return {table: hours for table, hours in found.items() if hours}


def missing_hive_partitions(warehouse: str, database: str, tables: list[str], day: dt.date) -> list[str]:
    """``db.table/dt=DAY`` partitions absent from a local warehouse directory.

    Only a local warehouse (a path or ``file:`` URI) can be checked without Spark or a metastore
    client; for any other the list is empty and the daily job itself names a missing partition
    (exit code 2).
    """
    parts = urlsplit(warehouse)
    if parts.scheme not in ("", "file"):
        return []
    root = Path(parts.path if parts.scheme else warehouse)
    return [
        f"{database}.{table}/dt={day.isoformat()}"
        for table in tables
        if not (root / f"{database}.db" / table / f"dt={day.isoformat()}").is_dir()
    ]

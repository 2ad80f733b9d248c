"""Read the warehouse's health from ClickHouse, the supervisor's state and the plan (no Spark).

Every query is bounded so 1,000 topics and months of history stay fast: a time window on the
table's partition column (``batch_time``, ``publish_hour``, ``period``, ``hour``, ``publish_time``)
and a ``LIMIT`` (``LIMIT n BY`` for per-group / per-topic tops). Aggregation happens in ClickHouse;
the Python side only shapes rows (the ``shape_*`` functions, pure and unit-tested).

Times are UTC datetimes; ``now`` is passed in (the page passes the wall clock, tests a fixed one).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from widehouse.contracts.periods import DAY, HOUR, sql_time
from widehouse.contracts.tables import COUNTS, GROUP_ROW, LEDGER, PROGRESS, QUARANTINE, RECONCILIATION

if TYPE_CHECKING:
    from widehouse.clickhouse import ClickHouse
    from widehouse.orchestration.supervisor import SupervisorState
    from widehouse.planner import Plan
    from widehouse.settings import PlannerSettings

# -- cell states of a table's strip, most severe first ---------------------------------------------
MISMATCH = "mismatch"
"""Not published: the newest reconciliation of the period found a topic that does not add up."""
WAITING = "waiting"
"""Ended, but a feeding group's watermark has not passed period end + lateness yet."""
DUE = "due"
"""The watermark passed: the period may be finalized, and nothing published it yet."""
LIVE = "live"
"""Not over yet: analysts see the live merged rows."""
REFINALIZED = "refinalized"
"""Published more than once, the newest with late data included (a backfill)."""
FORCED = "forced"
"""Published with ``force`` (the gate was bypassed)."""
ACCEPTED = "accepted"
"""Published with a reconciliation mismatch accepted by an operator."""
FINAL = "final"
"""Published, reconciled, gate respected."""
STATES: tuple[str, ...] = (MISMATCH, WAITING, DUE, LIVE, REFINALIZED, FORCED, ACCEPTED, FINAL)

SAMPLE_BYTES = 256
"""A sample payload is cut to this many bytes (it is shown, never downloaded)."""


@dataclass(frozen=True)
class Window:
    """How far back each part of the view looks, and how much it shows."""

    hours: int = 48
    """The hour strip of hourly tables, and the quarantine / late rates."""
    days: int = 14
    """The day strip (and how far back a group's last commit is looked for)."""
    chart_hours: int = 6
    """The groups' events/s and freshness charts, and the lag per topic."""
    lag_topics: int = 10
    """Topics with the most lag shown per group."""
    bad_topics: int = 50
    """Topics with the most quarantined + late messages shown."""
    reasons: int = 3
    """Top quarantine reasons shown per topic."""
    restart_hours: int = 24
    """A group's restarts are counted over this many hours."""


# -- slot groups ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class HourPoint:
    hour: dt.datetime
    events_per_s: float
    """Messages read in the hour over 3,600 s (the current hour: over the seconds gone by)."""
    freshness_s: float
    """The worst commit time minus watermark of the hour's batches: how stale finished data is."""


@dataclass(frozen=True)
class GroupHealth:
    name: str
    state: str
    """alive, stale (no batch committed within the supervisor's stale time), given-up, stopped
    (supervisor state says not running), unsupervised (no supervisor state: alive by commits),
    not started (in the plan, unknown to the supervisor, never committed in the window)."""
    alive: bool
    last_commit: dt.datetime | None
    last_batch: int | None
    watermark: dt.datetime | None
    restarts: int
    """Restarts by the supervisor after a failure within the last ``window.restart_hours`` (its
    ``restarted_at``); a query restarted inside the app is not counted (no record of it outlives the app)."""
    failures: int
    """Consecutive failures the supervisor counted (reset by a committed batch; it gives up at
    ``WIDEHOUSE_SUPERVISOR_MAX_FAILURES``)."""
    last_failure: str
    lag: tuple[tuple[str, int], ...]
    """(topic, messages behind) of the newest batch, largest first."""
    points: tuple[HourPoint, ...]


def read_groups(
    client: ClickHouse,
    app: str,
    now: dt.datetime,
    *,
    supervisor: SupervisorState | None,
    stale_seconds: float,
    planned: Iterable[str] = (),
    window: Window = Window(),
) -> list[GroupHealth]:
    """Every slot group that committed within ``window.days``, that the supervisor knows, or that the
    plan has (``planned``)."""
    since_days = now - window.days * DAY
    since_chart = _hour(now) - (window.chart_hours - 1) * HOUR
    summary = client.rows(
        f"SELECT `group`, max(committed_at), max(batch_id), max(watermark) FROM {PROGRESS} "
        f"WHERE app = {{app:String}} AND topic = '{GROUP_ROW}' AND batch_time >= {{a:DateTime64(3, 'UTC')}} "
        "AND batch_time <= {b:DateTime64(3, 'UTC')} GROUP BY `group` ORDER BY `group` LIMIT 10000",
        {"app": app, "a": sql_time(since_days), "b": sql_time(now)},
    )
    hourly = client.rows(
        f"SELECT `group`, toStartOfHour(batch_time) AS h, sum(rows_in), "
        "max(dateDiff('millisecond', watermark, committed_at)) "
        f"FROM {PROGRESS} FINAL WHERE app = {{app:String}} AND topic = '{GROUP_ROW}' "
        "AND batch_time >= {a:DateTime64(3, 'UTC')} AND batch_time <= {b:DateTime64(3, 'UTC')} "
        "GROUP BY `group`, h ORDER BY `group`, h LIMIT 100000",
        {"app": app, "a": sql_time(since_chart), "b": sql_time(now)},
    )
    lag = client.rows(
        f"SELECT `group`, topic, argMax(lag, batch_id) AS l FROM {PROGRESS} "
        f"WHERE app = {{app:String}} AND topic != '{GROUP_ROW}' AND batch_time >= {{a:DateTime64(3, 'UTC')}} "
        "AND batch_time <= {b:DateTime64(3, 'UTC')} GROUP BY `group`, topic "
        "ORDER BY `group`, l DESC, topic LIMIT {n:UInt32} BY `group` LIMIT 100000",
        {"app": app, "a": sql_time(since_chart), "b": sql_time(now), "n": window.lag_topics},
    )
    return shape_groups(summary, hourly, lag, now, supervisor, stale_seconds, planned, window.restart_hours)


def shape_groups(  # noqa: PLR0917 - the three query results and the judgement's inputs
    summary: Iterable[Sequence[Any]],
    hourly: Iterable[Sequence[Any]],
    lag: Iterable[Sequence[Any]],
    now: dt.datetime,
    supervisor: SupervisorState | None,
    stale_seconds: float,
    planned: Iterable[str] = (),
    restart_hours: int = 24,
) -> list[GroupHealth]:
    """Group health from the query rows (``(group, last commit, last batch, watermark)``,
    ``(group, hour, rows in, worst freshness ms)``, ``(group, topic, lag)``), the supervisor's state
    (restarts counted over the ``restart_hours`` up to ``now``) and the plan's group names."""
    commits = {str(g): (_utc(c), int(b), _utc(w)) for g, c, b, w in summary}
    points: dict[str, list[HourPoint]] = {}
    for g, h, rows, fresh_ms in hourly:
        hour = _utc(h)
        assert hour is not None
        seconds = min(3600.0, max(1.0, (now - hour).total_seconds()))
        points.setdefault(str(g), []).append(
            HourPoint(hour, int(rows) / seconds, max(0, int(fresh_ms)) / 1000)
        )
    lags: dict[str, list[tuple[str, int]]] = {}
    for g, topic, n in lag:
        lags.setdefault(str(g), []).append((str(topic), int(n)))
    known = supervisor.groups if supervisor is not None else {}
    until = now.timestamp()
    since = until - restart_hours * 3600.0
    out = []
    for name in sorted(set(commits) | set(known) | set(planned)):
        last, batch, mark = commits.get(name, (None, None, None))
        recent = last is not None and (now - last).total_seconds() <= stale_seconds
        st = known.get(name)
        if st is None and last is None:
            state = "not started"
        elif st is None:
            state = "unsupervised" if recent else "stale"
        elif st.given_up:
            state = "given-up"
        elif st.started_at is None:
            state = "stopped"
        else:
            state = "alive" if recent else "stale"
        out.append(
            GroupHealth(
                name=name,
                state=state,
                alive=state in ("alive", "unsupervised"),
                last_commit=last,
                last_batch=batch,
                watermark=mark,
                restarts=st.restarts_between(since, until) if st is not None else 0,
                failures=st.failures if st is not None else 0,
                last_failure=(st.last_failure[-300:] if st is not None else ""),
                lag=tuple(lags.get(name, ())),
                points=tuple(points.get(name, ())),
            )
        )
    return out


# -- wide tables' strips ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TableSpec:
    """What the view needs of a catalog table: its name, grain (hour / day) and feeding groups."""

    name: str
    grain: str
    groups: tuple[str, ...]
    """The plan's groups holding one of the table's topics (empty: every group that reports)."""


@dataclass(frozen=True)
class Cell:
    period: dt.datetime
    state: str
    publishes: int = 0
    run_id: str = ""
    finalized_at: dt.datetime | None = None
    rows: int = 0
    final_hours: int = 0
    """Day cells of an hourly table: how many of the day's hours are published."""
    airflow_run: str = ""
    """The Airflow DAG run of the newest publish, ``<dag id>/<run id>``; '' for ledger rows written
    before the ledger had the column, by a job no Airflow task ran, and for unpublished periods."""


@dataclass(frozen=True)
class Strip:
    table: str
    grain: str
    hours: tuple[Cell, ...]
    """The last ``window.hours`` hours (hourly tables only), oldest first."""
    days: tuple[Cell, ...]
    """The last ``window.days`` days, oldest first."""


@dataclass(frozen=True)
class LedgerEntry:
    publishes: int
    run_id: str
    forced: bool
    include_late: bool
    reconciliation: str
    rows: int
    finalized_at: dt.datetime
    airflow_run: str = ""


def read_strips(
    client: ClickHouse,
    tables: Sequence[TableSpec],
    watermarks: Mapping[str, dt.datetime | None],
    now: dt.datetime,
    *,
    lateness: dt.timedelta,
    window: Window = Window(),
) -> list[Strip]:
    """Each table's strips from the ledger, the reconciliation table and the groups' watermarks."""
    if not tables:
        return []
    since = _day(now) - (window.days - 1) * DAY
    names = [t.name for t in tables]
    # a ledger made before the column existed has none until the next publish's ensure adds it
    has_airflow_run = client.scalar(
        "SELECT count() FROM system.columns WHERE database = currentDatabase() "
        f"AND table = '{LEDGER}' AND name = 'airflow_run'"
    )
    airflow_run = "argMax(airflow_run, finalized_at)" if has_airflow_run else "''"
    ledger = client.rows(
        "SELECT `table`, period, count(), argMax(run_id, finalized_at), argMax(forced, finalized_at), "
        "argMax(include_late, finalized_at), argMax(reconciliation, finalized_at), "
        f"argMax(rows, finalized_at), max(finalized_at), {airflow_run} FROM {LEDGER} "
        "WHERE `table` IN {t:Array(String)} AND period >= {a:DateTime64(3, 'UTC')} "
        "AND finalized_at <= {b:DateTime64(3, 'UTC')} GROUP BY `table`, period LIMIT 1000000",
        {"t": names, "a": sql_time(since), "b": sql_time(now)},
    )
    mismatches = client.rows(
        "SELECT `table`, hour FROM (SELECT `table`, hour, topic, argMax(status, checked_at) AS s "
        f"FROM {RECONCILIATION} WHERE `table` IN {{t:Array(String)}} AND hour >= {{a:DateTime64(3, 'UTC')}} "
        "AND checked_at <= {b:DateTime64(3, 'UTC')} GROUP BY `table`, hour, topic) WHERE s = 'mismatch' "
        "GROUP BY `table`, hour LIMIT 1000000",
        {"t": names, "a": sql_time(since), "b": sql_time(now)},
    )
    return shape_strips(tables, ledger, mismatches, watermarks, now, lateness, window)


def shape_strips(  # noqa: PLR0917 - query rows and the judgement's inputs
    tables: Sequence[TableSpec],
    ledger: Iterable[Sequence[Any]],
    mismatches: Iterable[Sequence[Any]],
    watermarks: Mapping[str, dt.datetime | None],
    now: dt.datetime,
    lateness: dt.timedelta,
    window: Window = Window(),
) -> list[Strip]:
    """Strips from the ledger rows (``(table, period, publishes, run_id, forced, include_late,
    reconciliation, rows, finalized_at, airflow_run)`` of each period's newest publish), the periods
    whose newest reconciliation is a mismatch, and the feeding groups' watermarks."""
    entries: dict[tuple[str, dt.datetime], LedgerEntry] = {}
    for table, period, n, run_id, forced, late, rec, rows, at, airflow_run in ledger:
        p, f = _utc(period), _utc(at)
        assert p is not None
        assert f is not None
        entries[(str(table), p)] = LedgerEntry(
            int(n), str(run_id), bool(forced), bool(late), str(rec), int(rows), f, str(airflow_run)
        )
    refused = {(str(t), _utc(h)) for t, h in mismatches}
    out = []
    for spec in tables:
        feeding = [watermarks.get(g) for g in spec.groups] if spec.groups else list(watermarks.values())
        mark = None if not feeding or any(w is None for w in feeding) else min(w for w in feeding if w)

        def cell(period: dt.datetime, length: dt.timedelta, spec: TableSpec = spec, mark: Any = mark) -> Cell:
            entry = entries.get((spec.name, period))
            if entry is not None:
                return Cell(
                    period,
                    _published_state(entry),
                    entry.publishes,
                    entry.run_id,
                    entry.finalized_at,
                    entry.rows,
                    airflow_run=entry.airflow_run,
                )
            if (spec.name, period) in refused:
                return Cell(period, MISMATCH)
            if period + length > now:
                return Cell(period, LIVE)
            if mark is None or mark < period + length + lateness:
                return Cell(period, WAITING)
            return Cell(period, DUE)

        last_day = _day(now)
        day_starts = [last_day - i * DAY for i in range(window.days - 1, -1, -1)]
        if spec.grain == "hour":
            last_hour = _hour(now)
            hours = tuple(cell(last_hour - i * HOUR, HOUR) for i in range(window.hours - 1, -1, -1))
            days = tuple(_day_of_hours(d, [cell(d + i * HOUR, HOUR) for i in range(24)]) for d in day_starts)
        else:
            hours = ()
            days = tuple(cell(d, DAY) for d in day_starts)
        out.append(Strip(spec.name, spec.grain, hours, days))
    return out


def _published_state(entry: LedgerEntry) -> str:
    if entry.publishes > 1 and entry.include_late:
        return REFINALIZED
    if entry.forced:
        return FORCED
    if entry.reconciliation == "accepted":
        return ACCEPTED
    return FINAL


def _day_of_hours(day: dt.datetime, hours: list[Cell]) -> Cell:
    """A day cell of an hourly table: the most severe state of its hours."""
    state = min((h.state for h in hours), key=STATES.index)
    final = sum(1 for h in hours if h.state in (REFINALIZED, FORCED, ACCEPTED, FINAL))
    return Cell(day, state, rows=sum(h.rows for h in hours), final_hours=final)


# -- quarantine and late rates ---------------------------------------------------------------------


@dataclass(frozen=True)
class RatePoint:
    hour: dt.datetime
    rows_in: int
    bad: int
    late: int


@dataclass(frozen=True)
class TopicRates:
    topic: str
    rows_in: int
    bad: int
    late: int
    points: tuple[RatePoint, ...]
    reasons: tuple[tuple[str, int], ...]
    sample: dict[str, str] = field(default_factory=dict)
    """One recent quarantined message: reason, detail, payload (cut to :data:`SAMPLE_BYTES`)."""

    @property
    def bad_rate(self) -> float:
        return self.bad / self.rows_in if self.rows_in else 0.0

    @property
    def late_rate(self) -> float:
        return self.late / self.rows_in if self.rows_in else 0.0


@dataclass(frozen=True)
class Rejections:
    topics: tuple[TopicRates, ...]
    """The topics with the most quarantined + late messages in the window, most first."""
    reasons: tuple[tuple[str, int], ...]
    """The top quarantine reasons over every topic."""


def read_rejections(client: ClickHouse, app: str, now: dt.datetime, window: Window = Window()) -> Rejections:
    since = _hour(now) - (window.hours - 1) * HOUR
    params = {"app": app, "a": sql_time(since), "b": sql_time(now), "n": window.bad_topics}
    hours = (
        "app = {app:String} AND publish_hour BETWEEN {a:DateTime64(3, 'UTC')} AND {b:DateTime64(3, 'UTC')}"
    )
    top = (
        f"SELECT topic FROM {COUNTS} FINAL WHERE {hours} GROUP BY topic HAVING sum(bad) + sum(late) > 0 "
        "ORDER BY sum(bad) + sum(late) DESC, topic LIMIT {n:UInt32}"
    )
    counts = client.rows(
        f"SELECT topic, publish_hour, sum(rows_in), sum(bad), sum(late) FROM {COUNTS} FINAL WHERE {hours} "
        f"AND topic IN ({top}) GROUP BY topic, publish_hour ORDER BY topic, publish_hour LIMIT 1000000",
        params,
    )
    in_window = (
        "app = {app:String} AND publish_time BETWEEN {a:DateTime64(3, 'UTC')} AND {b:DateTime64(3, 'UTC')}"
    )
    reasons = client.rows(
        f"SELECT topic, reason, count() AS c FROM {QUARANTINE} WHERE {in_window} AND topic IN ({top}) "
        "GROUP BY topic, reason ORDER BY topic, c DESC, reason LIMIT {r:UInt32} BY topic LIMIT 100000",
        {**params, "r": window.reasons},
    )
    overall = client.rows(
        f"SELECT reason, count() AS c FROM {QUARANTINE} WHERE {in_window} "
        "GROUP BY reason ORDER BY c DESC, reason LIMIT 10",
        params,
    )
    samples = client.rows(
        "SELECT topic, reason, substring(detail, 1, 300), substring(payload, 1, {cut:UInt32}), payload_bytes "
        f"FROM {QUARANTINE} WHERE {in_window} AND topic IN ({top}) "
        "ORDER BY topic, publish_time DESC, message_id LIMIT 1 BY topic LIMIT 100000",
        {**params, "cut": SAMPLE_BYTES},
    )
    return shape_rejections(counts, reasons, overall, samples)


def shape_rejections(
    counts: Iterable[Sequence[Any]],
    reasons: Iterable[Sequence[Any]],
    overall: Iterable[Sequence[Any]],
    samples: Iterable[Sequence[Any]],
) -> Rejections:
    points: dict[str, list[RatePoint]] = {}
    for topic, hour, rows_in, bad, late in counts:
        h = _utc(hour)
        assert h is not None
        points.setdefault(str(topic), []).append(RatePoint(h, int(rows_in), int(bad), int(late)))
    by_topic: dict[str, list[tuple[str, int]]] = {}
    for topic, reason, n in reasons:
        by_topic.setdefault(str(topic), []).append((str(reason), int(n)))
    sample: dict[str, dict[str, str]] = {}
    for topic, reason, detail, payload, size in samples:
        text = payload.decode("utf-8", "replace") if isinstance(payload, bytes | bytearray) else str(payload)
        cut = " …" if int(size) > SAMPLE_BYTES else ""
        sample[str(topic)] = {"reason": str(reason), "detail": str(detail), "payload": text + cut}
    topics = [
        TopicRates(
            topic=t,
            rows_in=sum(p.rows_in for p in ps),
            bad=sum(p.bad for p in ps),
            late=sum(p.late for p in ps),
            points=tuple(ps),
            reasons=tuple(by_topic.get(t, ())),
            sample=sample.get(t, {}),
        )
        for t, ps in points.items()
    ]
    topics.sort(key=lambda r: (-(r.bad + r.late), r.topic))
    return Rejections(tuple(topics), tuple((str(r), int(n)) for r, n in overall))


# -- the plan ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GroupPlan:
    name: str
    topics: int
    load: float
    cores: int
    fill: float
    isolated: bool


@dataclass(frozen=True)
class PlanView:
    groups: tuple[GroupPlan, ...]
    isolated_topics: tuple[str, ...]
    topics: int
    cores: int


def shape_plan(plan: Plan, planner: PlannerSettings) -> PlanView:
    """The plan's groups with their load and fill (the plan's own planner settings if it has them)."""
    knobs = plan.settings or planner
    groups = tuple(
        GroupPlan(g.name, len(g.topics), g.load, g.cores, g.fill(knobs), g.isolated) for g in plan.groups
    )
    return PlanView(groups, plan.isolated_topics, len(plan.topics), plan.cores)


def table_specs(
    catalog_tables: Iterable[tuple[str, str, Iterable[str]]], plan: Plan | None
) -> list[TableSpec]:
    """:class:`TableSpec` per (table, grain, topics), feeding groups from the plan (if any)."""
    out = []
    for name, grain, topics in catalog_tables:
        wanted = set(topics)
        groups = tuple(sorted(g.name for g in plan.groups if wanted.intersection(g.topics))) if plan else ()
        out.append(TableSpec(name, grain, groups))
    return out


def _utc(value: Any) -> dt.datetime | None:
    if value is None:
        return None
    if not isinstance(value, dt.datetime):
        raise TypeError(f"expected a datetime, got {type(value).__name__}")
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


def _hour(value: dt.datetime) -> dt.datetime:
    return value.astimezone(dt.UTC).replace(minute=0, second=0, microsecond=0)


def _day(value: dt.datetime) -> dt.datetime:
    return _hour(value).replace(hour=0)


__all__ = [
    "ACCEPTED",
    "DUE",
    "FINAL",
    "FORCED",
    "LIVE",
    "MISMATCH",
    "REFINALIZED",
    "STATES",
    "WAITING",
    "Cell",
    "GroupHealth",
    "GroupPlan",
    "HourPoint",
    "PlanView",
    "Rejections",
    "Strip",
    "TableSpec",
    "TopicRates",
    "Window",
    "read_groups",
    "read_rejections",
    "read_strips",
    "shape_groups",
    "shape_plan",
    "shape_rejections",
    "shape_strips",
    "table_specs",
]

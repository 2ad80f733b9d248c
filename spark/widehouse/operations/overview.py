"""One snapshot of the warehouse's health from the settings: ClickHouse, the catalog, the plan file
(``<state>/plan.json``) and the supervisor's state (``<state>/supervisor/state.json``).

:func:`overview` is what the Airflow view calls per request; :func:`as_json` makes it plain JSON
(datetimes as ISO 8601 strings). Nothing here returns a DSN, a password or a token: the only free
text from outside ClickHouse's own columns, the supervisor's last failure (a log tail), has every
secret of the settings redacted.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from widehouse.operations.health import (
    GroupHealth,
    PlanView,
    Rejections,
    Strip,
    Window,
    read_groups,
    read_rejections,
    read_strips,
    shape_plan,
    table_specs,
)
from widehouse.operations.repairs import TableRepairs, read_repairs

if TYPE_CHECKING:
    from widehouse.settings import Settings


@dataclass(frozen=True)
class Overview:
    now: dt.datetime
    app: str
    groups: tuple[GroupHealth, ...]
    strips: tuple[Strip, ...]
    rejections: Rejections
    plan: PlanView | None
    problems: tuple[str, ...] = ()
    repairs: tuple[TableRepairs, ...] = ()
    """Per table, the repairs of quarantined events over the long window (:mod:`.repairs`)."""
    """What could not be read (a missing plan, an unreadable supervisor state), for the page."""


def overview(settings: Settings, now: dt.datetime | None = None, window: Window | None = None) -> Overview:
    """Read everything the view shows (one ClickHouse client for the request, closed after)."""
    from widehouse.catalog import load_catalog
    from widehouse.clickhouse import connect
    from widehouse.errors import OrchestrationError
    from widehouse.orchestration.supervisor import SupervisorState, state_path_for
    from widehouse.planner import load_plan

    now = (now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC)
    window = window or Window()
    problems: list[str] = []
    plan_path = settings.state_dir / "plan.json"
    plan = load_plan(plan_path) if plan_path.is_file() else None
    if plan is None:
        problems.append(f"no plan file at {plan_path}: tables are judged on every reporting group")
    try:
        supervisor: SupervisorState | None = SupervisorState.load(state_path_for(settings.state_dir))
    except OrchestrationError as exc:
        supervisor = None
        problems.append(str(exc))
    catalog = load_catalog(settings.schemas_dir)
    if settings.stream.tenant_suffix:  # the topics the streams read (as the tasks' deployment catalog)
        catalog = catalog.relocated(settings.stream.tenant_suffix)
    specs = table_specs(
        ((t.name, t.grain, [str(p.name) for p in catalog.topics_for(t.name)]) for t in catalog.wide_tables),
        plan,
    )
    lateness = dt.timedelta(milliseconds=catalog.rules.lateness_ms)
    app = settings.stream.app
    client = connect(settings.clickhouse, create_database=False)
    try:
        groups = read_groups(
            client,
            app,
            now,
            supervisor=supervisor,
            stale_seconds=settings.supervisor.stale_seconds,
            planned=[g.name for g in plan.groups] if plan is not None else (),
            window=window,
        )
        hidden = secrets_of(settings)
        groups = [dataclasses.replace(g, last_failure=redact(g.last_failure, hidden)) for g in groups]
        marks = {g.name: g.watermark for g in groups}
        strips = read_strips(client, specs, marks, now, lateness=lateness, window=window)
        rejections = read_rejections(client, app, now, window)
        repairs = read_repairs(client, now - dt.timedelta(days=window.days))
    finally:
        client.close()
    return Overview(
        now=now,
        app=app,
        groups=tuple(groups),
        strips=tuple(strips),
        rejections=rejections,
        plan=shape_plan(plan, settings.planner) if plan is not None else None,
        problems=tuple(problems),
        repairs=tuple(repairs),
    )


def secrets_of(settings: Settings) -> list[str]:
    """Every secret value the settings hold (passwords, tokens, their URL-quoted forms)."""
    from urllib.parse import quote, unquote, urlsplit

    found = [
        settings.local.clickhouse_password,
        settings.airflow.password,
        settings.pulsar.auth_token,
        urlsplit(settings.clickhouse.dsn).password,
    ]
    values = {v for v in found if v}
    return sorted(
        values | {quote(v, safe="") for v in values} | {unquote(v) for v in values}, key=len, reverse=True
    )


def redact(text: str, secrets: list[str]) -> str:
    """``text`` with every one of ``secrets`` replaced by ``***`` (log tails shown on the page)."""
    from widehouse.settings import MASK

    for secret in secrets:
        text = text.replace(secret, MASK)
    return text


def as_json(view: Overview) -> dict[str, Any]:
    """The overview as plain JSON (datetimes as ISO 8601, tuples as lists)."""
    body: dict[str, Any] = _plain(dataclasses.asdict(view))
    return body


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dt.datetime):
        return value.isoformat()
    return value


__all__ = ["Overview", "as_json", "overview", "redact", "secrets_of"]

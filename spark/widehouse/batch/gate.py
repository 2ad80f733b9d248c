"""May hour H of a table be finalized? (No Spark, no Airflow: the hourly sensor calls this too.)

Hour H is final once every slot group feeding the table has committed a watermark at or past
``H + 1 h + lateness``: every message published before then has been written, and an event of
hour H published after it is late by definition (it goes to ``late_events``, not the hour).

The groups feeding a table are the plan's groups (``<state>/plan.json``) holding one of the
table's topics; with no plan, the groups that ever reported progress for those topics. A group
that never committed a batch has no watermark and holds the hour back.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING

from widehouse.contracts.periods import HOUR, as_hour, hour_text, sql_time
from widehouse.contracts.tables import GROUP_ROW, PROGRESS

if TYPE_CHECKING:
    from pathlib import Path

    from widehouse.catalog import Catalog
    from widehouse.clickhouse import ClickHouse
    from widehouse.settings import Settings


@dataclass(frozen=True)
class Gate:
    """The answer for one (table, hour)."""

    table: str
    hour: dt.datetime
    needed: dt.datetime
    """Every feeding group's watermark must be at or past this: hour end + lateness."""
    groups: dict[str, dt.datetime | None]
    """Feeding group -> its newest committed watermark (None: never committed)."""

    @property
    def lagging(self) -> dict[str, dt.datetime | None]:
        return {g: w for g, w in self.groups.items() if w is None or w < self.needed}

    @property
    def ready(self) -> bool:
        return bool(self.groups) and not self.lagging

    @property
    def message(self) -> str:
        hour = hour_text(self.hour)
        if not self.groups:
            return (
                f"{self.table} {hour}: no slot group feeds this table yet (no plan group holds its "
                "topics and no group reported progress for them)"
            )
        if self.ready:
            return f"{self.table} {hour}: every feeding group is past {self.needed.isoformat()}"
        lagging = ", ".join(
            f"{g} at {w.isoformat() if w else 'nothing committed'}" for g, w in sorted(self.lagging.items())
        )
        return (
            f"{self.table} {hour} is not final yet: the watermark must reach {self.needed.isoformat()} "
            f"(hour end + lateness) in every feeding group; lagging: {lagging}"
        )


def needed_watermark(catalog: Catalog, hour: dt.datetime) -> dt.datetime:
    return as_hour(hour) + HOUR + dt.timedelta(milliseconds=catalog.rules.lateness_ms)


def feeding_groups(catalog: Catalog, table: str, plan_path: Path | None) -> list[str] | None:
    """The plan's groups holding a topic of ``table``; None when there is no plan file."""
    if plan_path is None or not plan_path.is_file():
        return None
    from widehouse.planner.io import load_plan

    topics = {str(t.name) for t in catalog.topics_for(table)}
    return sorted(g.name for g in load_plan(plan_path).groups if topics.intersection(g.topics))


def watermarks(
    client: ClickHouse, catalog: Catalog, table: str, app: str, groups: list[str] | None
) -> dict[str, dt.datetime | None]:
    """Group -> newest committed watermark of ``app`` (for ``groups``, or every group that reported
    progress for one of the table's topics)."""
    if groups is None:
        topics = [str(t.name) for t in catalog.topics_for(table)]
        found = client.rows(
            f"SELECT DISTINCT `group` FROM {PROGRESS} WHERE app = {{app:String}} "
            "AND topic IN {topics:Array(String)}",
            {"app": app, "topics": topics},
        )
        groups = sorted(str(g) for (g,) in found)
    if not groups:
        return {}
    rows = client.rows(
        f"SELECT `group`, max(watermark) FROM {PROGRESS} WHERE app = {{app:String}} "
        f"AND topic = '{GROUP_ROW}' AND `group` IN {{groups:Array(String)}} GROUP BY `group`",
        {"app": app, "groups": groups},
    )
    found_marks = {str(g): _utc(w) for g, w in rows}
    return {g: found_marks.get(g) for g in groups}


def check(  # noqa: PLR0917 - the gate's inputs, named at every call site
    client: ClickHouse, catalog: Catalog, table: str, hour: dt.datetime, app: str, plan_path: Path | None
) -> Gate:
    """The gate of (table, hour) from the progress table."""
    hour = as_hour(hour)
    groups = feeding_groups(catalog, table, plan_path)
    return Gate(table, hour, needed_watermark(catalog, hour), watermarks(client, catalog, table, app, groups))


def hour_gate(settings: Settings, catalog: Catalog, table: str, hour: dt.datetime) -> Gate:
    """:func:`check` with the settings' ClickHouse, app and plan (``<state>/plan.json``)."""
    from widehouse.clickhouse import connect

    catalog.table(table)  # a clear error for an unknown table
    client = connect(settings.clickhouse)
    try:
        return check(client, catalog, table, hour, settings.stream.app, settings.state_dir / "plan.json")
    finally:
        client.close()


def _utc(value: dt.datetime | None) -> dt.datetime | None:
    if value is None:
        return None
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


__all__ = ["Gate", "check", "feeding_groups", "hour_gate", "needed_watermark", "sql_time", "watermarks"]

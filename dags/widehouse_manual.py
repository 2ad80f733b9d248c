"""# Manual operations

Five DAGs without a schedule, each with a typed trigger form (Trigger DAG -> the form):

- `widehouse_refinalize`: re-finalize a range of hours of one hourly table (`include_late`,
  `accept_mismatch`, `force`); emits the table's Asset event with the hours.
- `widehouse_rebuild_day`: run the daily merge for one day again.
- `widehouse_replan_now`: replan from live traffic with capacity overrides (empty = settings),
  optionally growing partitions in Pulsar. A replan that sees no traffic at all fails and keeps
  the plan in force, unless `force`.
- `widehouse_repair`: after a catalog fix, re-parse one wide table's quarantined events of a range
  of publish hours (optionally some topics / reasons), fold the now-valid ones in exactly once and
  re-publish the periods they touch (`widehouse repair`).
- `widehouse_retire_app`: stop a slot group that left the plan and remove its Pulsar subscriptions
  now.

Required fields have no default: the form (and the REST API) refuses a run without them, and
refuses an hour that is not an RFC 3339 date-time (`2026-11-22T09:00:00Z`).

Waits for: nothing (a re-finalize still refuses hours whose watermark has not passed, unless
`force`). Re-run: trigger again with the same params; every operation is idempotent.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from airflow.sdk import Asset, Param, dag, task

from widehouse.catalog import load_catalog
from widehouse.contracts.identity import final_asset_uri
from widehouse.orchestration import dagdefaults, params

CATALOG = load_catalog(dagdefaults.schemas_dir())


def manual(dag_id: str, specs: dict[str, dict[str, object]], tags: list[str]) -> dict[str, Any]:
    """``@dag`` arguments of a manual DAG: no schedule, no retries, its form built from ``specs``."""
    form = {name: Param(**spec) for name, spec in specs.items()}
    return dagdefaults.dag_arguments(dag_id, schedule=None, retries=0, tags=tags, doc_md=__doc__, params=form)


def form_task(task_id: str, timeout: dt.timedelta, call: Callable[[Any, dict[str, object]], object]) -> None:
    """A task that hands the run's form to a use case of :mod:`widehouse.orchestration.tasks`
    (imported when the task runs, never at parse time): ``call(tasks, form)``."""

    @task(task_id=task_id, execution_timeout=timeout)
    def run(params: dict[str, object] | None = None) -> object:
        from widehouse.orchestration import tasks

        assert params is not None
        return call(tasks, params)

    run()


@dag(**manual("widehouse_refinalize", params.refinalize_params(CATALOG), ["widehouse", "manual", "hourly"]))
def widehouse_refinalize() -> None:
    outlets = [Asset(name=f"{t}_final", uri=final_asset_uri(t)) for t in params.hourly_tables(CATALOG)]

    @task(outlets=outlets, execution_timeout=dt.timedelta(hours=6))
    def refinalize(params: dict[str, object] | None = None, outlet_events: object = None) -> list[str]:
        from widehouse.orchestration import tasks

        assert params is not None
        asset = next(a for a in outlets if a.name == f"{params['table']}_final")
        return tasks.refinalize(params, outlet_events[asset])  # type: ignore[index]

    refinalize()


@dag(**manual("widehouse_rebuild_day", params.rebuild_day_params(), ["widehouse", "manual", "daily"]))
def widehouse_rebuild_day() -> None:
    form_task("rebuild", dt.timedelta(hours=3), lambda tasks, form: tasks.rebuild_day(form))


@dag(**manual("widehouse_replan_now", params.replan_params(), ["widehouse", "manual", "planner"]))
def widehouse_replan_now() -> None:
    form_task("replan", dt.timedelta(minutes=20), lambda tasks, form: tasks.replan_now(form))


@dag(**manual("widehouse_repair", params.repair_params(CATALOG), ["widehouse", "manual", "hourly"]))
def widehouse_repair() -> None:
    form_task("repair", dt.timedelta(hours=6), lambda tasks, form: tasks.repair(form))


@dag(**manual("widehouse_retire_app", params.retire_params(), ["widehouse", "manual", "streams"]))
def widehouse_retire_app() -> None:
    form_task("retire", dt.timedelta(minutes=20), lambda tasks, form: tasks.retire_app(form))


widehouse_refinalize()
widehouse_rebuild_day()
widehouse_replan_now()
widehouse_repair()
widehouse_retire_app()

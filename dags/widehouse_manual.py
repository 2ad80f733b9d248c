"""# Manual operations

Four DAGs without a schedule, each with a typed trigger form (Trigger DAG -> the form):

- `widehouse_refinalize`: re-finalize a range of hours of one hourly table (`include_late`,
  `accept_mismatch`, `force`); emits the table's Asset event with the hours.
- `widehouse_rebuild_day`: run the daily merge for one day again.
- `widehouse_replan_now`: replan from live traffic with capacity overrides (empty = settings),
  optionally growing partitions in Pulsar. A replan that sees no traffic at all fails and keeps
  the plan in force, unless `force`.
- `widehouse_retire_app`: stop a slot group that left the plan and remove its Pulsar subscriptions
  now.

Required fields have no default: the form (and the REST API) refuses a run without them, and
refuses an hour that is not an RFC 3339 date-time (`2026-11-22T09:00:00Z`).

Waits for: nothing (a re-finalize still refuses hours whose watermark has not passed, unless
`force`). Re-run: trigger again with the same params; every operation is idempotent.
"""

from __future__ import annotations

import datetime as dt

from airflow.sdk import Asset, Param, dag, task

from widehouse.catalog import load_catalog
from widehouse.contracts.identity import final_asset_uri
from widehouse.orchestration import dagdefaults, params

CATALOG = load_catalog(dagdefaults.schemas_dir())
COMMON = {
    "schedule": None,
    "start_date": dagdefaults.start(),
    "catchup": False,
    "max_active_runs": 1,
    "default_args": dagdefaults.default_args(retries=0),
    "doc_md": __doc__,
}


def _params(specs: dict[str, dict[str, object]]) -> dict[str, Param]:
    return {name: Param(**spec) for name, spec in specs.items()}


@dag(
    dag_id="widehouse_refinalize",
    params=_params(params.refinalize_params(CATALOG)),
    tags=["widehouse", "manual", "hourly"],
    **COMMON,
)
def widehouse_refinalize() -> None:
    outlets = [Asset(name=f"{t}_final", uri=final_asset_uri(t)) for t in params.hourly_tables(CATALOG)]

    @task(outlets=outlets, execution_timeout=dt.timedelta(hours=6))
    def refinalize(params: dict[str, object] | None = None, outlet_events: object = None) -> list[str]:
        from widehouse.orchestration import tasks

        assert params is not None
        asset = next(a for a in outlets if a.name == f"{params['table']}_final")
        return tasks.refinalize(params, outlet_events[asset])  # type: ignore[index]

    refinalize()


@dag(
    dag_id="widehouse_rebuild_day",
    params=_params(params.rebuild_day_params()),
    tags=["widehouse", "manual", "daily"],
    **COMMON,
)
def widehouse_rebuild_day() -> None:
    @task(execution_timeout=dt.timedelta(hours=3))
    def rebuild(params: dict[str, object] | None = None) -> None:
        from widehouse.orchestration import tasks

        assert params is not None
        tasks.rebuild_day(params)

    rebuild()


@dag(
    dag_id="widehouse_replan_now",
    params=_params(params.replan_params()),
    tags=["widehouse", "manual", "planner"],
    **COMMON,
)
def widehouse_replan_now() -> None:
    @task(execution_timeout=dt.timedelta(minutes=20))
    def replan(params: dict[str, object] | None = None) -> str:
        from widehouse.orchestration import tasks

        assert params is not None
        overrides = {k: params.get(k) for k in ("slot_capacity", "target_fill", "isolation", "imbalance")}
        return tasks.replan(
            overrides, apply=bool(params.get("apply_partitions")), force=bool(params.get("force"))
        )

    replan()


@dag(
    dag_id="widehouse_retire_app",
    params=_params(params.retire_params()),
    tags=["widehouse", "manual", "streams"],
    **COMMON,
)
def widehouse_retire_app() -> None:
    @task(execution_timeout=dt.timedelta(minutes=20))
    def retire(params: dict[str, object] | None = None) -> None:
        from widehouse.orchestration import tasks

        assert params is not None
        tasks.retire_group(str(params["group"]))

    retire()


widehouse_refinalize()
widehouse_rebuild_day()
widehouse_replan_now()
widehouse_retire_app()

"""# Replan

Every 6 hours (and on demand): plans slot groups from live Pulsar traffic (median of the last
`WIDEHOUSE_PLAN_SMOOTHING` observations) against the plan in force, moving as few topics as it
can. The new plan is written as `<state>/plans/plan-<time>.json` and becomes `<state>/plan.json`
(earlier versions stay in `plans/`); the task log shows the moves and the balance. The streams
supervisor applies it on its next cycle. When no topic carries any traffic (producers stopped) the
run is skipped and the plan in force kept, with the reason in the task log.

For capacity overrides or applying partitions use `widehouse_replan_now`.

Waits for: nothing. Re-run: trigger it; roll back by copying a version over `plan.json`.
"""

from __future__ import annotations

import datetime as dt

from airflow.sdk import dag, task

from widehouse.orchestration import dagdefaults


@dag(
    **dagdefaults.dag_arguments(
        "widehouse_replan", schedule="0 */6 * * *", tags=["widehouse", "planner"], doc_md=__doc__
    )
)
def widehouse_replan() -> None:
    @task(execution_timeout=dt.timedelta(minutes=20))
    def replan() -> str:
        from widehouse.orchestration import tasks

        return tasks.replan({}, apply=False, idle_skips=True)

    replan()


widehouse_replan()

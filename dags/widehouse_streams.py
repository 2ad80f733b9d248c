"""# Streams supervisor

Every 3 minutes, makes the running streaming apps match the slot plan (`<state>/plan.json`):
one `widehouse stream --group G` app per slot group (local mode: a detached process with pid file
and log under `<state>/streams/G/`; cluster mode: `spark-submit --deploy-mode cluster`, setting
`WIDEHOUSE_SUPERVISOR_MODE`).

- **Alive** = process up *and* a batch committed within `WIDEHOUSE_SUPERVISOR_STALE_SECONDS`
  (ClickHouse `stream_progress`). Dead or stuck apps restart from their checkpoint: at once, then
  with exponential backoff; after `WIDEHOUSE_SUPERVISOR_MAX_FAILURES` failures in a row the task
  fails with the app's log tail and the group stays down until `widehouse supervise --reset G`.
- **Plan change**: groups whose topics changed are stopped at a batch boundary (SIGTERM, grace)
  and restarted on the new plan; groups that left the plan are retired and
  `widehouse pulsar cleanup` runs.

Waits for: nothing. Re-run: trigger it (it is idempotent); state in `<state>/supervisor/state.json`.
"""

from __future__ import annotations

import datetime as dt

from airflow.sdk import dag, task

from widehouse.orchestration import dagdefaults


@dag(
    **dagdefaults.dag_arguments(
        "widehouse_streams",
        schedule="*/3 * * * *",
        retries=0,
        tags=["widehouse", "streams"],
        doc_md=__doc__,
        dagrun_timeout=dt.timedelta(minutes=15),
    )
)
def widehouse_streams() -> None:
    @task(execution_timeout=dt.timedelta(minutes=10))
    def supervise() -> dict[str, object]:
        from widehouse.orchestration import tasks

        return tasks.supervise_streams()

    supervise()


widehouse_streams()

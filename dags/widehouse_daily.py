"""# Daily merge

One run per UTC day (`@daily`, catchup on). A sensor (reschedule mode) waits until every hour of
the day is finalized for every hourly table (the batch layer's ledger) and the day's Hive
partitions exist; then `widehouse daily --day D` aggregates the offline Hive tables into HBase
(family `h`), merges the stream's day (family `s`) and extracts the day to ClickHouse
`user_daily_final` and silver Delta, atomically per day.

Exit code 2 (e.g. a missing Hive partition) fails without retry; 1 retries.

Waits for: the day's 24 finalized hours (see `widehouse_hourly`) and its Hive partitions.
Re-run: clear the `merge` task, trigger `widehouse_rebuild_day`, or backfill:
`airflow backfill create --dag-id widehouse_daily --from-date ... --to-date ...
--reprocess-behavior completed`.
"""

from __future__ import annotations

import datetime as dt

from airflow.sdk import dag, task

from widehouse.orchestration import dagdefaults


@dag(
    **dagdefaults.dag_arguments(
        "widehouse_daily",
        schedule="@daily",
        catchup=True,
        tags=["widehouse", "batch", "daily"],
        doc_md=__doc__,
    )
)
def widehouse_daily() -> None:
    @task.sensor(mode="reschedule", poke_interval=300, timeout=dt.timedelta(hours=36).total_seconds())
    def day_finalized(data_interval_start: dt.datetime | None = None) -> bool:
        from widehouse.orchestration import tasks

        assert data_interval_start is not None
        return tasks.day_is_ready(data_interval_start.date())

    @task(execution_timeout=dt.timedelta(hours=3))
    def merge(data_interval_start: dt.datetime | None = None) -> None:
        from widehouse.orchestration import tasks

        assert data_interval_start is not None
        tasks.daily(data_interval_start.date())

    day_finalized() >> merge()


widehouse_daily()

"""# Hourly finalize

One run per hour (`@hourly`, catchup on from `WIDEHOUSE_AIRFLOW_START`; a run's logical date is
the hour it finalizes): for each hourly wide table of the catalog (`schemas/`),
a sensor waits (reschedule mode) until every slot group feeding the table has a committed
watermark past hour end + lateness, then `widehouse finalize --table T --hour H` reconciles counts
and publishes the hour to ClickHouse `T_final` and silver Delta. Each finalized table-hour emits an
Asset event on `widehouse://final/T` (extra: table, hours).

Exit codes: 3 (not ready) retries; 2 (bad input) and 4 (reconciliation mismatch) fail without
retry — re-run with `accept_mismatch` or `include_late` from `widehouse_refinalize`.

Waits for: the streams' watermarks. Re-run: clear the task, or backfill a range (both dates
inclusive): `airflow backfill create --dag-id widehouse_hourly --from-date ... --to-date ...
--reprocess-behavior completed`.
"""

from __future__ import annotations

import datetime as dt

from airflow.sdk import Asset, dag, task

from widehouse.catalog import load_catalog
from widehouse.contracts.identity import final_asset_uri
from widehouse.orchestration import dagdefaults
from widehouse.orchestration.params import hourly_tables


def final_asset(table: str) -> Asset:
    return Asset(name=f"{table}_final", uri=final_asset_uri(table))


@dag(
    **dagdefaults.dag_arguments(
        "widehouse_hourly",
        schedule="@hourly",
        catchup=True,
        max_active_runs=4,
        tags=["widehouse", "batch", "hourly"],
        doc_md=__doc__,
    )
)
def widehouse_hourly() -> None:
    for table in hourly_tables(load_catalog(dagdefaults.schemas_dir())):
        asset = final_asset(table)

        @task.sensor(
            task_id=f"wait_{table}",
            mode="reschedule",
            poke_interval=60,
            timeout=dt.timedelta(hours=12).total_seconds(),
        )
        def wait(table: str = table, data_interval_start: dt.datetime | None = None) -> bool:
            from widehouse.orchestration import tasks

            assert data_interval_start is not None
            return tasks.hour_is_ready(table, data_interval_start)

        @task(
            task_id=f"finalize_{table}",
            outlets=[asset],
            execution_timeout=dt.timedelta(hours=1),
            max_active_tis_per_dag=1,  # hours of one table one after another (one silver Delta table)
        )
        def finalize(
            table: str = table,
            asset: Asset = asset,
            data_interval_start: dt.datetime | None = None,
            outlet_events: object = None,
        ) -> list[str]:
            from widehouse.orchestration import tasks

            assert data_interval_start is not None
            return tasks.finalize(table, [data_interval_start], outlet_events[asset])  # type: ignore[index]

        wait() >> finalize()


widehouse_hourly()

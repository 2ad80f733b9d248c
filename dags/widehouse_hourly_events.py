"""# Hourly finalize, event-driven

The alternative to `widehouse_hourly`'s polling sensors: for each hourly wide table of the catalog
an Asset `widehouse://watermark/T` is watched by a `PulsarWatermarkTrigger` in the triggerer, which
reads the streams' watermark events (`WIDEHOUSE_STREAM_CONTROL_TOPIC`) and fires the moment every
slot group feeding T has passed the next unfinalized hour's end + lateness. This DAG then runs
`widehouse finalize --table T --hour H` for the hours the event names, and emits the same Asset event
on `widehouse://final/T` as the polling DAG.

Use one of the two: unpause `widehouse_hourly_events` and pause `widehouse_hourly` (or the reverse).
Both are safe together (a second finalize of an hour publishes an identical new version) but do the
work twice.

Waits for: the watermark events (streams publish one per committed batch). Re-run: trigger
`widehouse_refinalize` for the hours, or clear the task (it re-reads the same triggering events).
"""

from __future__ import annotations

import datetime as dt

from airflow.sdk import Asset, AssetWatcher, dag, task
from airflow.sdk.definitions.asset import AssetAny

from widehouse.catalog import load_catalog
from widehouse.contracts.identity import final_asset_uri, watermark_asset_uri
from widehouse.orchestration import dagdefaults
from widehouse.orchestration.params import hourly_tables
from widehouse.orchestration.pulsar_trigger import PulsarWatermarkTrigger


def watermark_asset(table: str) -> Asset:
    trigger = PulsarWatermarkTrigger(table=table, start_hour=dagdefaults.start().isoformat())
    return Asset(
        name=f"{table}_watermark",
        uri=watermark_asset_uri(table),
        watchers=[AssetWatcher(name=f"{table}_watermark_events", trigger=trigger)],
    )


TABLES = hourly_tables(load_catalog(dagdefaults.schemas_dir()))
WATCHED = [watermark_asset(t) for t in TABLES]


@dag(
    **dagdefaults.dag_arguments(
        "widehouse_hourly_events",
        schedule=AssetAny(*WATCHED),
        tags=["widehouse", "batch", "hourly"],
        doc_md=__doc__,
    )
)
def widehouse_hourly_events() -> None:
    for table in TABLES:
        final = Asset(name=f"{table}_final", uri=final_asset_uri(table))

        @task(task_id=f"finalize_{table}", outlets=[final], execution_timeout=dt.timedelta(hours=1))
        def finalize(
            table: str = table,
            final: Asset = final,
            triggering_asset_events: object = None,
            outlet_events: object = None,
        ) -> list[str]:
            from widehouse.orchestration import tasks

            return tasks.finalize_from_events(table, triggering_asset_events, outlet_events[final])  # type: ignore[index]

        finalize()


widehouse_hourly_events()

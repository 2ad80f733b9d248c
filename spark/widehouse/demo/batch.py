"""The demo's batch part: finalize every hour the demo streamed, then check the final tables.

The demo cannot wait for the watermark (hour end + lateness, up to two hours away), so it
finalizes with ``force`` — recorded in the ledger as such, exactly as ``widehouse finalize --force``
would. Reconciliation still runs and must pass. The final rows are checked against the generator's
manifest in both stores (ClickHouse analyst view ``user_hourly`` and Delta ``silver/user_hourly``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from widehouse.batch.finalize import BatchContext, FinalizeRequest, finalize_hour
from widehouse.demo.result import DemoResult, Section
from widehouse.generator.manifest import Manifest, diff_rows

Rows = dict[tuple[Any, Any], dict[str, Any]]
Say = Callable[[str], None]


def finalize_demo_hours(
    ctx: BatchContext, manifest: Manifest, result: DemoResult, silver_rows: Callable[[str], Rows], say: Say
) -> list[dt.datetime]:
    """Finalize (forced) every hour of every hourly table in the manifest; check both stores."""
    done: list[dt.datetime] = []
    for table in ctx.catalog.wide_tables:
        if table.grain != "hour" or table.name not in manifest.tables():
            continue
        want = manifest.expected_rows(table.name)
        hours = sorted({dt.datetime.fromtimestamp(ms / 1000, dt.UTC) for _, ms in want})
        for hour in hours:
            outcome = finalize_hour(ctx, FinalizeRequest(table.name, hour, force=True))
            say(f"  finalized {table.name} {hour:%Y-%m-%dT%H}: {outcome.published.rows} rows (forced)")
            done.append(hour)
        view = {
            (r[table.key_name], r[table.period]): r
            for r in ctx.client.query(f"SELECT * FROM {table.name}").named_results()
        }
        for sink, rows in (("clickhouse final (view)", view), ("delta silver", silver_rows(table.name))):
            problems = diff_rows(want, rows)
            detail = "" if not problems else f"{len(problems)} differences, e.g. {problems[0]}"
            result.check(f"{sink} {table.name}", len(want), not problems, detail)
    ledger = ctx.client.query(
        "SELECT `table`, period, rows, forced, reconciliation, finalized_at FROM finalized_periods "
        "ORDER BY period, `table`"
    )
    result.sections.append(
        Section(
            "the ledger of published periods (wh.finalized_periods)",
            tuple(ledger.column_names),
            [tuple(r) for r in ledger.result_rows],
        )
    )
    volume = ctx.client.query(
        "SELECT hour, topic, events, quarantined, quarantine_share, late FROM hourly_topic_volume "
        "ORDER BY events DESC LIMIT 10"
    )
    result.sections.append(
        Section(
            "analyst view: event volume per topic and hour, with quarantine share (wh.hourly_topic_volume)",
            tuple(volume.column_names),
            [tuple(r) for r in volume.result_rows],
        )
    )
    return done

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
from widehouse.contracts.periods import hour_text
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
            say(f"  finalized {table.name} {hour_text(hour)}: {outcome.published.rows} rows (forced)")
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


def check_demo_days(  # noqa: PLR0917 - the demo's pieces, named at the one call site
    ctx: BatchContext,
    manifest: Manifest,
    result: DemoResult,
    run_day: Callable[[dt.date], Any],
    hive_users: Callable[[dt.date], set[int]],
    say: Say,
) -> None:
    """Run the daily merge of every day the demo streamed, then check ``user_daily``: its stream
    columns equal the manifest's rows, and it has one row per user of the stream or of Hive (the
    Hive users read straight from the raw offline tables, not through the merge)."""
    for table in ctx.catalog.wide_tables:
        if table.grain != "day" or not table.offline or table.name not in manifest.tables():
            continue
        want = manifest.expected_rows(table.name)
        days = sorted({dt.datetime.fromtimestamp(ms / 1000, dt.UTC).date() for _, ms in want})
        for day in days:
            outcome = run_day(day)
            say(
                f"  daily merge {table.name} {day}: {outcome.extracted} rows from HBase "
                f"({outcome.buckets} salt buckets) published"
            )
            rows = {
                (r[table.key_name], r[table.period]): r
                for r in ctx.client.query(
                    f"SELECT * FROM {table.name} WHERE {table.period} = {{d:Date}}", {"d": day.isoformat()}
                ).named_results()
            }
            day_ms = int(dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC).timestamp() * 1000)
            want_day = {k: v for k, v in want.items() if k[1] == day_ms}
            streamed = {k: v for k, v in rows.items() if (k[0], day_ms) in want_day}
            problems = diff_rows(want_day, streamed)
            result.check(
                f"clickhouse final {table.name} {day} (stream columns)",
                len(want_day),
                not problems,
                f"{len(problems)} differences, e.g. {problems[0]}" if problems else "",
            )
            users = {k for k, _ in want_day} | hive_users(day)
            result.check(
                f"clickhouse final {table.name} {day}: a row per stream or Hive user",
                len(users),
                len(rows) == len(users),
                "" if len(rows) == len(users) else f"got {len(rows)} rows",
            )
    actives = ctx.client.query(
        "SELECT day, country, actives, payers, pay_usd, payer_share FROM daily_actives_by_country "
        "ORDER BY day, actives DESC LIMIT 12"
    )
    result.sections.append(
        Section(
            "analyst view: daily actives and payers per country (wh.daily_actives_by_country)",
            tuple(actives.column_names),
            [tuple(r) for r in actives.result_rows],
        )
    )
    gifters = ctx.client.query("SELECT * FROM top_gifters_daily ORDER BY day, rank LIMIT 10")
    result.sections.append(
        Section(
            "analyst view: top gifters of the day (wh.top_gifters_daily)",
            tuple(gifters.column_names),
            [tuple(r) for r in gifters.result_rows],
        )
    )

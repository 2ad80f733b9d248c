"""The batch half at N users: a realistic day built, one hour finalized, the day merged, both checked exactly.

Everything is private to the run (a ClickHouse database, a Hive database, an HBase table prefix, a
Pulsar tenant suffix, a state dir with its own Delta root) on the running local services, and
dropped at the end (``--keep`` keeps it). Steps:

``setup: stream partials``  ClickHouse generates (``INSERT ... SELECT`` from ``numbers()``) the
                            stream's partial rows of ``user_hourly`` and ``user_daily`` for every
                            hour of the day: the benchmark hour with every user (``--batches``
                            partial rows each, as micro-batches leave them), the other 23 hours
                            with every ``--hour-share``-th user.
``setup: offline (Hive)``   ``generate-offline`` for the same users and day.
``finalize hour``           :func:`widehouse.batch.finalize.finalize_hour` of ``user_hourly`` (gate
                            forced, reconciliation, final rows into ClickHouse, Delta silver, ledger)
                            and the day's HBase stream-family refresh, as ``widehouse finalize`` runs it.
``daily merge``             :func:`widehouse.batch.daily.spark.run_daily` of ``user_daily`` (family
                            s, family h from Hive, extract, publish to both stores), as it runs
                            after the day's last hourly finalize: that finalize's refresh wrote
                            family s, so the merge finds the partials unchanged and skips it.
``daily merge, --rewrite-stream``  the same, writing family s again (``--no-rewrite-run``: not run).

Per step: rows, seconds, rows/s, and the peak resident memory of every process involved (this
Python process, Spark's JVM, HBase's JVM, its Thrift server, the ClickHouse service), sampled from
``/proc/<pid>/status`` every 0.2 s during the step. Then the exactness checks, each a count of
differing rows (must be 0): the final rows of the hour and the stream columns of the day, as
ClickHouse's own GROUP BY over the raw partials computes them (written here, independently of the
finalize SQL), against ``<T>_final`` (the ledger's version) and against silver Delta (read by
delta-rs); and the day's silver rows against its ``<T>_final`` rows, every column. A plot of
seconds and peak memory per step goes beside the JSON results (bench/results/).

    python -m bench batch_scale --users 100000 [--batches 2] [--hour-share 8] [--buckets N] [--keep]
    python -m bench batch_scale --users 1000000 --no-hbase   # finalize only: spares a small HBase
    WIDEHOUSE_HBASE_THRIFT_PORT=... python -m bench batch_scale --hbase-state DIR   # a private HBase
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from bench.common import machine, save, table

DAY = dt.date(2026, 11, 22)
HOUR = dt.datetime(2026, 11, 22, 12, tzinfo=dt.UTC)
PAGE = 200_000
"""Rows per batch when silver is read back for a check (memory flat in N)."""


# -------------------------------------------------------------------------------- process memory
def _pid(state_dir: Path, service: str) -> int | None:
    path = state_dir / "services" / service / f"{service}.pid"
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass  # the process is gone: nothing to count
    return 0


class Memory:
    """Samples the resident memory of named processes in a thread; prints progress lines."""

    def __init__(self, pids: dict[str, int | None], interval: float = 0.2, progress: float = 15.0) -> None:
        self.pids = {k: v for k, v in pids.items() if v}
        self.interval = interval
        self.progress = progress
        self._peak: dict[str, int] = {}
        self._step = ""
        self._started = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def add(self, name: str, pid: int | None) -> None:
        if pid:
            self.pids[name] = pid

    def begin(self, step: str) -> None:
        self._peak = {name: _rss_kib(pid) for name, pid in self.pids.items()}
        self.start = {name: round(kib / 1024, 1) for name, kib in self._peak.items()}
        """RSS (MiB) at the step's start: a process's peak minus this is what the step added."""
        self._step = step
        self._started = time.perf_counter()
        print(f"[{time.strftime('%H:%M:%S')}] {step} ...", flush=True)

    def end(self) -> dict[str, float]:
        """Peak MiB per process since :meth:`begin`."""
        self._sample()
        step, self._step = self._step, ""
        print(
            f"[{time.strftime('%H:%M:%S')}] {step}: {time.perf_counter() - self._started:.1f} s", flush=True
        )
        return {name: round(kib / 1024, 1) for name, kib in self._peak.items()}

    def _sample(self) -> None:
        for name, pid in list(self.pids.items()):
            self._peak[name] = max(self._peak.get(name, 0), _rss_kib(pid))

    def _run(self) -> None:
        last = time.perf_counter()
        while not self._stop.wait(self.interval):
            if not self._step:
                continue
            self._sample()
            now = time.perf_counter()
            if now - last >= self.progress:
                last = now
                peaks = ", ".join(f"{k} {v / 1024:.0f}" for k, v in self._peak.items())
                print(f"    ... {self._step}: {now - self._started:.0f} s (peak MiB: {peaks})", flush=True)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


# -------------------------------------------------------------------------------- the day's data
def partial_insert(wide: Any, first_uid: int, users: int, batches: int, share: int) -> list[str]:
    """INSERT ... SELECT statements filling ``<T>_partial`` for the day (values vary with user,
    hour and batch; pair times are distinct per (user, hour, batch): first / last are unambiguous;
    doubles are multiples of 1/8: their sums are exact in any order)."""
    names = ", ".join(["uid", "hour", *(f"`{c.name}`" for c in wide.columns)])
    statements = []
    for hour in range(24):
        start = dt.datetime(DAY.year, DAY.month, DAY.day, hour, tzinfo=dt.UTC)
        busy = start == HOUR
        rows = users * batches if busy else users // share
        if not rows:
            continue
        # number -> (user, batch): the benchmark hour has every user `batches` times; the others
        # every `share`-th user once (a different slice each hour)
        user = f"intDiv(number, {batches})" if busy else f"(number * {share} + {hour % share})"
        batch = f"(number % {batches})" if busy else "0"
        base = f"toDateTime64('{start:%Y-%m-%d %H:%M:%S}', 3, 'UTC')"
        values = {
            "long": f"toInt64(({user} * 7 + {batch} * 13 + {hour}) % 1000)",
            "int": f"toInt32(({user} + {batch} * 3 + {hour}) % 100)",
            "double": f"(({user} * 3 + {batch} * 5 + {hour}) % 1000) / 8.0",
            "string": f"concat('v', toString(({user} + {batch} * 7 + {hour}) % 50))",
            "boolean": f"({user} + {batch}) % 2 = 0",
            "timestamp-ms": f"{base} + toIntervalMillisecond(({user} * 11 + {batch} * 997) % 3600000)",
        }
        exprs = [
            f"toInt64({first_uid} + {user}) AS uid",
            f"toDateTime('{start:%Y-%m-%d %H:%M:%S}', 'UTC') AS hour",
        ]
        for column in wide.columns:
            value = values[column.value_type]
            if column.agg == "count":
                expr = f"toUInt64(({user} + {batch} + {hour}) % 7)"
            elif column.is_pair:
                # distinct per (user, batch) within the hour: batch b at b seconds + user ms
                ms = f"(({user} % 1000) * 3000 + {batch} * 1000 + {hour} * 7) % 3600000"
                expr = f"({base} + toIntervalMillisecond({ms}), {value})"
            else:
                expr = value
            exprs.append(f"{expr} AS `{column.name}`")
        statements.append(
            f"INSERT INTO `{wide.name}_partial` ({names}) SELECT {', '.join(exprs)} FROM numbers({rows})"
        )
    return statements


# -------------------------------------------------------------------------------- exactness
def independent_sql(wide: Any, partial: str, where: str, period: str) -> str:
    """The final rows as written here from the aggregate kinds, not by the code under test."""
    exprs = ["uid", f"{period} AS p"]
    for column in wide.columns:
        ref = f"`{column.name}`"
        if column.agg in {"count", "sum"}:
            expr = f"sum({ref})"
        elif column.agg in {"min", "max"}:
            expr = f"{column.agg}({ref})"
        elif column.agg == "first":
            expr = f"argMin(tupleElement({ref}, 'v'), tupleElement({ref}, 'ts'))"
        else:  # last
            expr = f"argMax(tupleElement({ref}, 'v'), tupleElement({ref}, 'ts'))"
        exprs.append(f"{expr} AS {ref}")
    return f"SELECT {', '.join(exprs)} FROM {partial} WHERE {where} GROUP BY uid, p"


def differences(
    client: Any, expected: str, actual: str, columns: list[str], slices: int = 1
) -> tuple[int, dict[str, int]]:
    """Rows of ``expected`` and ``actual`` (each with ``uid``, ``p`` and ``columns``) that differ:
    missing on either side, or a column whose value differs (compared as text; NULL as itself).
    Compared in ``slices`` slices of users (``cityHash64(uid) % slices``, pushed below the GROUP
    BYs), so no one query aggregates a million users' day at once."""
    text = "ifNull(toString({side}.`{c}`), '<null>')"
    per_column = ", ".join(
        f"countIf({text.format(side='e', c=c)} != {text.format(side='a', c=c)}) AS `{c}`" for c in columns
    )
    any_column = " OR ".join(f"{text.format(side='e', c=c)} != {text.format(side='a', c=c)}" for c in columns)
    missing, bad = 0, dict.fromkeys(columns, 0)
    for part in range(slices):
        cut = f"WHERE cityHash64(uid) % {slices} = {part}"
        e, a = f"SELECT * FROM ({expected}) {cut}", f"SELECT * FROM ({actual}) {cut}"
        result = client.query(
            f"SELECT count() AS matched, countIf({any_column}) AS differing, {per_column} "
            f"FROM ({e}) AS e INNER JOIN ({a}) AS a ON e.uid = a.uid AND e.p = a.p"
        )
        row = next(iter(result.named_results()))
        n_expected = int(client.scalar(f"SELECT count() FROM ({e})"))
        n_actual = int(client.scalar(f"SELECT count() FROM ({a})"))
        matched = int(row["matched"])
        missing += (n_expected - matched) + (n_actual - matched) + int(row["differing"])
        for c in columns:
            bad[c] += int(row[c])
    return missing, {c: n for c, n in bad.items() if n}


def silver_into_clickhouse(client: Any, path: str, wide: Any, period_filter: Any, target: str) -> int:
    """The period's silver rows (delta-rs, in batches) into a scratch ClickHouse table shaped like
    ``<T>_final``; returns the rows copied."""
    import deltalake
    import pyarrow as pa
    import pyarrow.dataset as ds

    client.command(f"DROP TABLE IF EXISTS `{target}`")
    client.command(f"CREATE TABLE `{target}` AS `{wide.name}_final`")
    dataset = deltalake.DeltaTable(path).to_pyarrow_dataset()
    columns = [n for n in dataset.schema.names if n != "wh_date"]
    copied = 0
    for batch in dataset.to_batches(columns=columns, filter=period_filter(ds.field), batch_size=PAGE):
        if batch.num_rows:
            client.insert_arrow(target, pa.Table.from_batches([batch]))
            copied += batch.num_rows
    return copied


# -------------------------------------------------------------------------------- the run
def main(argv: list[str]) -> int:  # noqa: PLR0915 - one linear script: setup, steps, checks, report
    parser = argparse.ArgumentParser(prog="python -m bench batch_scale", description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=100_000)
    parser.add_argument("--batches", type=int, default=2, help="partial rows per user in the finalized hour")
    parser.add_argument("--hour-share", type=int, default=8, help="1/share of the users in each other hour")
    parser.add_argument("--buckets", type=int, default=None, help="HBase salt buckets (default: the setting)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--keep", action="store_true", help="keep the private databases and tables")
    parser.add_argument(
        "--hbase-state",
        type=Path,
        default=None,
        help="state dir of the HBase services when they are not the checkout's (their pid files)",
    )
    parser.add_argument(
        "--no-hbase",
        action="store_true",
        help="finalize only: no offline setup, no HBase day-row refresh, no daily merge (spares HBase)",
    )
    parser.add_argument(
        "--no-rewrite-run",
        action="store_true",
        help="skip the second daily merge (the one with --rewrite-stream, which writes family s again)",
    )
    args = parser.parse_args(argv)

    from widehouse.settings import load_settings

    shared_state = load_settings().state_dir  # the running services' pid files
    suffix = uuid.uuid4().hex[:6]
    state = Path(tempfile.mkdtemp(prefix="wh-bench-scale-"))
    os.environ.update(
        {
            "WIDEHOUSE_STATE_DIR": str(state),
            "WIDEHOUSE_CLICKHOUSE_DATABASE": f"wh_bench_scale_{suffix}",
            "WIDEHOUSE_HBASE_TABLE_PREFIX": f"bench_{suffix}_",
            "WIDEHOUSE_TENANT_SUFFIX": f"scale{suffix}",
            "WIDEHOUSE_SPARK_MASTER": args.master,
        }
    )
    from widehouse import hbase
    from widehouse.batch.daily import DailyRequest
    from widehouse.batch.daily.spark import run_daily
    from widehouse.batch.finalize import BatchContext, FinalizeRequest, finalize_hour
    from widehouse.batch.spark import DeltaSilver, batch_catalog, day_refresher, silver_path
    from widehouse.clickhouse import connect
    from widehouse.generator.options import FIRST_UID
    from widehouse.offline.spark import OfflineSpec, generate_offline
    from widehouse.pulsar.admin import PulsarAdmin
    from widehouse.spark.session import build_session
    from widehouse.stream.tables import ensure_clickhouse

    settings = load_settings()
    if args.buckets:
        settings = dataclasses.replace(
            settings, hbase=dataclasses.replace(settings.hbase, salt_buckets=args.buckets)
        )
    catalog = batch_catalog(settings)
    hourly, daily = catalog.table("user_hourly"), catalog.table("user_daily")
    offline_db = f"bench_scale_{suffix}"
    client = connect(settings.clickhouse)
    memory = Memory(
        {
            "python": os.getpid(),
            "clickhouse": _pid(shared_state, "clickhouse"),
            "hbase": _pid(args.hbase_state or shared_state, "hbase"),
            "hbase-thrift": _pid(args.hbase_state or shared_state, "hbase-thrift"),
        }
    )
    steps: list[dict[str, Any]] = []
    checks: dict[str, Any] = {}
    spark = None
    print(f"batch_scale: {args.users:,} users, day {DAY}, hour {HOUR:%H}:00, private suffix {suffix}")
    print(f"load average before: {os.getloadavg()}")
    try:
        ensure_clickhouse(client, catalog)

        def step(name: str, rows_of: Any, fn: Any) -> Any:
            memory.begin(name)
            started = time.perf_counter()
            out = fn()
            seconds = time.perf_counter() - started
            peaks = memory.end()
            rows = rows_of(out)
            steps.append(
                {
                    "step": name,
                    "rows": rows,
                    "seconds": round(seconds, 2),
                    "rows_per_s": round(rows / seconds) if seconds and rows else 0,
                    "peak_mib": peaks,
                    "added_mib": {k: round(v - memory.start.get(k, 0.0), 1) for k, v in peaks.items()},
                    "load": round(os.getloadavg()[0], 1),
                }
            )
            return out

        def setup_partials() -> int:
            total = 0
            for wide in (hourly,) if args.no_hbase else (hourly, daily):
                for statement in partial_insert(wide, FIRST_UID, args.users, args.batches, args.hour_share):
                    client.command(statement)
                total += int(client.scalar(f"SELECT count() FROM `{wide.name}_partial`"))
            return total

        step("setup: stream partials (ClickHouse)", lambda n: n, setup_partials)

        def start_spark() -> Any:
            session = build_session(
                settings, "bench-batch-scale", overrides={"spark.sql.shuffle.partitions": "4"}
            )
            gateway = getattr(session.sparkContext, "_gateway", None)
            proc = getattr(gateway, "proc", None)
            memory.add("spark", getattr(proc, "pid", None))
            return session

        spark = step("setup: Spark session", lambda _s: 0, start_spark)
        if not args.no_hbase:
            step(
                "setup: offline Hive tables (generate-offline)",
                lambda c: sum(c.values()),
                lambda: generate_offline(
                    spark, OfflineSpec(args.users, (DAY,), database=offline_db), catalog.sql_dir
                ),
            )

        with PulsarAdmin(settings.pulsar) as admin:
            ctx = BatchContext(
                client=client,
                admin=admin,
                catalog=catalog,
                silver=DeltaSilver(lambda: spark, settings.delta),  # as `widehouse finalize`
                app=settings.stream.app,
                refresh_day=None if args.no_hbase else day_refresher(settings, client, catalog),
            )
            # the first publish creates silver/user_hourly (and starts Spark to register it); the
            # re-run is the steady state of an hourly job (the table exists: no Spark)
            for label in ("first publish", "re-run"):
                outcome = step(
                    f"finalize hour ({label}" + (")" if args.no_hbase else ", incl. HBase refresh)"),
                    lambda o: o.published.rows,
                    lambda: finalize_hour(ctx, FinalizeRequest("user_hourly", HOUR, force=True)),
                )
                _detail(
                    steps[-1],
                    {**outcome.seconds, **outcome.published.seconds, "hbase_rows": outcome.hbase_rows},
                )
        # the daily merge as it runs after the day's last hourly finalize (whose refresh already
        # wrote family s: the merge finds the partials unchanged), then once more rewriting family s
        daily_runs = [("daily merge (user_daily)", False)]
        daily_runs += [] if args.no_rewrite_run else [("daily merge, --rewrite-stream", True)]
        for label, rewrite in [] if args.no_hbase else daily_runs:
            request = DailyRequest(
                day=DAY, offline_database=offline_db, salt_buckets=args.buckets, rewrite_stream=rewrite
            )
            merged = step(
                label,
                lambda o: o.published.rows,
                lambda request=request: run_daily(
                    spark, settings, catalog, client, DeltaSilver(spark, settings.delta), request
                ),
            )
            _detail(
                steps[-1],
                {
                    "family s unchanged": merged.stream.unchanged,
                    **{k: round(v, 2) for k, v in merged.seconds.items()},
                    **{f"publish {k}": v for k, v in merged.published.seconds.items()},
                },
            )

        # ---------------------------------------------------------------- exactness
        import pyarrow as pa

        memory.begin("checks")
        slices = max(1, -(-args.users // 125_000))  # users per comparison query: at most ~125k
        hour_sql = f"toDateTime('{HOUR:%Y-%m-%d %H:%M:%S}', 'UTC')"
        expected_hour = independent_sql(hourly, "user_hourly_partial", f"hour = {hour_sql}", "hour")
        stream_cols = [c.name for c in hourly.columns]
        version = "finalized_at = (SELECT max(finalized_at) FROM finalized_periods WHERE `table` = '{t}')"
        final_hour = (
            f"SELECT uid, hour AS p, {', '.join(f'`{c}`' for c in stream_cols)} FROM user_hourly_final "
            f"WHERE hour = {hour_sql} AND {version.format(t='user_hourly')}"
        )
        checks["hour: independent GROUP BY vs user_hourly_final"] = differences(
            client, expected_hour, final_hour, stream_cols, slices
        )
        copied = silver_into_clickhouse(
            client,
            silver_path(settings.delta, "user_hourly"),
            hourly,
            lambda f: f("hour") == pa.scalar(HOUR, pa.timestamp("us", tz="UTC")),
            "check_silver_hourly",
        )
        silver_hour = final_hour.replace("user_hourly_final", "check_silver_hourly").replace(
            f" AND {version.format(t='user_hourly')}", ""
        )
        checks["hour: independent GROUP BY vs silver (delta-rs)"] = differences(
            client, expected_hour, silver_hour, stream_cols, slices
        )
        if not args.no_hbase:
            day_sql = f"toDate('{DAY}')"
            expected_day = independent_sql(
                daily, "user_daily_partial", f"toDate(hour) = {day_sql}", "toDate(hour)"
            )
            day_cols = [c.name for c in daily.columns]
            all_day_cols = day_cols + [c.name for c in daily.offline_columns]
            final_day = (
                f"SELECT uid, day AS p, {', '.join(f'`{c}`' for c in all_day_cols)} FROM user_daily_final "
                f"WHERE day = {day_sql} AND {version.format(t='user_daily')}"
            )
            # the day's rows include offline-only users (stream columns: counts 0, rest null): compare
            # the stream columns on the users that have stream partials
            final_day_stream = (
                f"SELECT * FROM ({final_day}) WHERE uid IN (SELECT uid FROM user_daily_partial)"
            )
            checks["day: independent GROUP BY vs user_daily_final (stream columns)"] = differences(
                client, expected_day, final_day_stream, day_cols, slices
            )
            copied += silver_into_clickhouse(
                client,
                silver_path(settings.delta, "user_daily"),
                daily,
                lambda f: f("day") == pa.scalar(DAY, pa.date32()),
                "check_silver_daily",
            )
            silver_day = final_day.replace("user_daily_final", "check_silver_daily").replace(
                f" AND {version.format(t='user_daily')}", ""
            )
            checks["day: user_daily_final vs silver (delta-rs), every column"] = differences(
                client, final_day, silver_day, all_day_cols, slices
            )
        checks_mem = memory.end()
        steps.append(
            {"step": "checks (not timed work)", "rows": copied, "seconds": 0, "peak_mib": checks_mem}
        )
    finally:
        memory.close()
        if not args.keep:
            _cleanup(client, spark, settings, suffix, offline_db, None if args.no_hbase else hbase)
            shutil.rmtree(state, ignore_errors=True)
        client.close()

    processes = sorted({p for s in steps for p in s.get("peak_mib", {})})
    rows = [
        [
            s["step"],
            s["rows"],
            s["seconds"],
            s.get("rows_per_s", ""),
            *(s["peak_mib"].get(p, "") for p in processes),
        ]
        for s in steps
    ]
    print(
        table(
            f"\nbatch at {args.users:,} users - {machine()}; load average after {os.getloadavg()}",
            ["step", "rows", "seconds", "rows/s", *(f"{p} MiB" for p in processes)],
            rows,
        )
    )
    print("  peak minus RSS at the step's start (MiB): what each step added")
    for s in steps:
        if "added_mib" in s:
            print(f"    {s['step']}: " + ", ".join(f"{k} {v:+.0f}" for k, v in s["added_mib"].items()))
    print("\nexactness (differing rows; must be 0):")
    failed = False
    for name, (count, columns) in checks.items():
        failed |= count != 0
        print(f"  {name}: {count}" + (f"  columns: {columns}" if columns else ""))
    path = save("batch_scale", {"args": vars(args), "steps": steps, "checks": checks})
    for plot in _plot(steps, args.users, path):
        print(f"plot: {plot}")
    print(f"results: {path}")
    return 1 if failed else 0


def _detail(step: dict[str, Any], detail: dict[str, Any]) -> None:
    """Sub-step timings, kept and printed at once (a later step may fail)."""
    step["detail"] = detail
    print(f"    {step['step']}: " + ", ".join(f"{k} {v}" for k, v in detail.items()), flush=True)


def _cleanup(  # noqa: PLR0917 - what the run created, where
    client: Any, spark: Any, settings: Any, suffix: str, offline_db: str, hbase: Any
) -> None:
    """Drop everything the run created (each part on its own: one failing does not keep the rest)."""
    try:
        client.command(f"DROP DATABASE IF EXISTS `{client.database}`")
    except Exception as exc:  # cleanup: report and go on
        print(f"cleanup: ClickHouse database not dropped: {exc}", file=sys.stderr)
    if spark is not None:
        try:
            spark.sql(f"DROP DATABASE IF EXISTS {offline_db} CASCADE")
            spark.stop()
        except Exception as exc:  # cleanup: report and go on
            print(f"cleanup: Hive database {offline_db} not dropped: {exc}", file=sys.stderr)
    if hbase is None:
        return
    try:
        connection = hbase.connect(settings.hbase)
        for name in connection.tables():
            if name.decode().startswith(f"bench_{suffix}_"):
                connection.delete_table(name, disable=True)
        connection.close()
    except Exception as exc:  # cleanup: report and go on
        print(f"cleanup: HBase tables bench_{suffix}_* not dropped: {exc}", file=sys.stderr)


def _plot(steps: list[dict[str, Any]], users: int, results: Path) -> list[Path]:
    """Seconds per step and peak memory per process and step, beside the JSON results."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    timed = [s for s in steps if s["seconds"]]
    processes = sorted({p for s in steps for p in s.get("peak_mib", {})})
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.5))
    labels = [
        s["step"].replace(" (ClickHouse)", "").replace(", incl. HBase refresh", " + HBase") for s in timed
    ]
    left.barh(range(len(timed)), [s["seconds"] for s in timed])
    left.set_yticks(range(len(timed)), labels, fontsize=8)
    left.set_xlabel("seconds")
    left.invert_yaxis()
    left.set_title(f"batch at {users:,} users: wall time per step")
    width = 0.8 / max(1, len(processes))
    for i, process in enumerate(processes):
        right.bar(
            [j + i * width for j in range(len(timed))],
            [s["peak_mib"].get(process, 0) for s in timed],
            width,
            label=process,
        )
    right.set_xticks(
        [j + 0.4 - width / 2 for j in range(len(timed))], labels, rotation=20, ha="right", fontsize=7
    )
    right.set_ylabel("peak RSS during the step (MiB)")
    right.legend(fontsize=7)
    fig.tight_layout()
    path = results.with_suffix(".png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]

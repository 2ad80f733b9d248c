"""``widehouse generate`` (event traffic to Pulsar + manifest) and ``widehouse generate-offline`` (Hive)."""

from __future__ import annotations

import argparse
import datetime as dt
import re
from pathlib import Path
from typing import Any

from widehouse.commands.command import add_command
from widehouse.commands.table import render
from widehouse.commands.ticker import Ticker, rate_text
from widehouse.contracts.identity import OFFLINE_DATABASE
from widehouse.contracts.periods import PeriodError, parse_day, parse_moment
from widehouse.errors import ConfigError
from widehouse.generator.badinput import BAD_CLASSES
from widehouse.generator.options import GenerateOptions
from widehouse.settings import Settings


def register(subparsers: Any) -> None:
    parser = add_command(
        subparsers,
        "generate",
        run,
        help="publish realistic, labelled events for the catalog's topics and write a manifest",
        description="Publish realistic JSON events (with labelled bad and late input) to the catalog's "
        "Pulsar topics and write a manifest of what was sent and which wide rows must result.",
    )
    size = parser.add_argument_group("how much")
    size.add_argument("--count", type=int, help="total messages")
    size.add_argument("--duration", type=float, metavar="SECONDS", help="run this long at --rate")
    size.add_argument(
        "--rate",
        type=float,
        default=1000.0,
        help="messages/s over all topics; 0 = as fast as possible (default 1000)",
    )
    size.add_argument(
        "--burst-factor", type=float, default=1.0, help="rate multiplier during bursts (default 1: none)"
    )
    size.add_argument(
        "--burst-every", type=float, default=60.0, metavar="SECONDS", help="burst period (default 60)"
    )
    size.add_argument(
        "--burst-length", type=float, default=10.0, metavar="SECONDS", help="burst length (default 10)"
    )
    shape = parser.add_argument_group("what")
    shape.add_argument("--seed", type=int, default=1, help="same seed, same events (default 1)")
    shape.add_argument(
        "--base-time", help="event time of the first message: ISO 8601 or epoch ms (default: now)"
    )
    shape.add_argument("--users", type=int, default=1000, help="distinct users (default 1000)")
    shape.add_argument(
        "--user-skew", type=float, default=1.0, help="Zipf exponent of user activity (default 1.0)"
    )
    shape.add_argument(
        "--topic-skew", type=float, help="Zipf exponent over topics (default: catalog weights)"
    )
    shape.add_argument("--topics", metavar="REGEX", help="only topics whose catalog name matches")
    shape.add_argument("--bad-rate", type=float, default=0.01, help="share of bad messages (default 0.01)")
    shape.add_argument(
        "--bad-classes",
        default=",".join(BAD_CLASSES),
        help=f"comma-separated (default all: {','.join(BAD_CLASSES)})",
    )
    shape.add_argument("--late-rate", type=float, default=0.005, help="share of late events (default 0.005)")
    shape.add_argument("--variants", type=int, default=256, help="distinct bodies per topic (default 256)")
    where = parser.add_argument_group("where")
    where.add_argument("--schemas", type=Path, help="catalog directory (default: WIDEHOUSE_SCHEMAS_DIR)")
    where.add_argument("--tenant-suffix", help="publish to <tenant>-<suffix> (isolated test or demo runs)")
    where.add_argument("--create-topics", action="store_true", help="create / grow partitioned topics first")
    where.add_argument(
        "--partitions",
        type=int,
        help="with --create-topics: partitions for all topics (default: catalog hints)",
    )
    where.add_argument(
        "--manifest", type=Path, help="manifest path (default: <state>/generator/manifest.json)"
    )
    where.add_argument(
        "--dry-run", action="store_true", help="generate and write the manifest, publish nothing"
    )
    where.add_argument(
        "--pregenerate", action="store_true", help="serialize everything before sending (fastest)"
    )


def register_offline(subparsers: Any) -> None:
    parser = add_command(
        subparsers,
        "generate-offline",
        run_offline,
        help="build the offline Hive tables (payments, profile, social graph) for the generated users",
    )
    parser.add_argument("--manifest", type=Path, help="take users, seed and days from a generate manifest")
    parser.add_argument("--users", type=int, default=1000, help="users (default 1000; same keys as generate)")
    parser.add_argument("--seed", type=int, default=1, help="same seed, same rows (default 1)")
    parser.add_argument("--days", type=int, default=1, help="this many days ending --until (default 1)")
    parser.add_argument("--until", help="last day, YYYY-MM-DD (default: today, UTC)")
    parser.add_argument("--database", default=OFFLINE_DATABASE, help="Hive database (default offline)")
    parser.add_argument(
        "--aggregate", action="store_true", help="also run the daily offline SQL and print a sample"
    )


def parse_base_time(value: str | None) -> int | None:
    """Epoch ms from ``1778000000000`` or an ISO 8601 time (UTC if no offset)."""
    if value is None:
        return None
    if re.fullmatch(r"\d{12,14}", value):
        return int(value)
    try:
        moment = parse_moment(value, "--base-time")
    except PeriodError as exc:
        raise ConfigError(
            f"--base-time {value!r} is neither epoch milliseconds nor an ISO 8601 time"
        ) from exc
    return int(moment.timestamp() * 1000)


def options_from_args(args: argparse.Namespace, settings: Settings) -> GenerateOptions:
    classes = tuple(c.strip() for c in args.bad_classes.split(",") if c.strip())
    return GenerateOptions(
        count=args.count,
        duration_s=args.duration,
        rate=args.rate,
        seed=args.seed,
        base_time_ms=parse_base_time(args.base_time),
        users=args.users,
        user_skew=args.user_skew,
        topic_skew=args.topic_skew,
        topics=args.topics,
        bad_rate=args.bad_rate,
        bad_classes=classes,
        late_rate=args.late_rate,
        burst_factor=args.burst_factor,
        burst_every_s=args.burst_every,
        burst_length_s=args.burst_length,
        variants=args.variants,
        tenant_suffix=args.tenant_suffix,
        create_topics=args.create_topics,
        partitions=args.partitions,
        manifest_path=args.manifest or settings.state_dir / "generator" / "manifest.json",
        dry_run=args.dry_run,
        pregenerate=args.pregenerate,
    ).validate()


def run(args: argparse.Namespace, settings: Settings) -> int:
    from widehouse.catalog.loader import load_catalog
    from widehouse.generator.run import generate

    options = options_from_args(args, settings)
    catalog = load_catalog(args.schemas or settings.schemas_dir)
    ticker = Ticker()
    verb = "generated" if options.dry_run else "published"

    def progress(done: int, total: int | None, seconds: float) -> None:
        share = f" / {total:,} ({done / total:.0%})" if total else ""
        parts = (f"{verb} {done:,}{share}", rate_text(done, seconds, "msg"), f"{seconds:.0f} s")
        text = "  ".join(p for p in parts if p)
        ticker.show(text, force=total is not None and done >= total)  # the last figure always shows

    try:
        manifest = generate(settings, options, catalog, progress if ticker.enabled else None)
    finally:
        ticker.done()
    totals = manifest.counts()
    rows: list[tuple[str, int, int, int, int]] = []
    for topic in sorted(manifest.topics, key=lambda t: -manifest.counts(t).sent):
        counts = manifest.counts(topic)
        rows.append(
            (manifest.published_name(topic), counts.sent, counts.wide, counts.late, counts.quarantined)
        )
    shown = rows[:15]
    if len(rows) > len(shown):
        rest = rows[len(shown) :]
        shown.append(
            (
                f"... {len(rest)} more topics",
                sum(r[1] for r in rest),
                sum(r[2] for r in rest),
                sum(r[3] for r in rest),
                sum(r[4] for r in rest),
            )
        )
    shown.append(("total", totals.sent, totals.wide, totals.late, totals.quarantined))
    print(render(("topic", "sent", "wide", "late", "quarantined"), shown))
    run_info = manifest.data.get("run", {})
    if run_info.get("dry_run"):
        print("\ndry run: nothing published")
    else:
        print(
            f"\npublished {run_info['sent']:,} messages in {run_info['elapsed_s']:.1f} s "
            f"({run_info['rate_achieved']:,.0f} msg/s; max {run_info['max_lag_ms']} ms behind schedule; "
            f"exact={run_info['exact']})"
        )
    for name in manifest.tables():
        print(f"expected {name}: {len(manifest.expected_rows(name)):,} rows")
    print(f"manifest: {options.manifest_path}")
    return 0 if manifest.exact else 1


def run_offline(args: argparse.Namespace, settings: Settings) -> int:
    from widehouse.catalog.loader import load_catalog
    from widehouse.generator.manifest import Manifest
    from widehouse.offline.spark import OfflineSpec, generate_offline, offline_frame
    from widehouse.spark.session import build_session

    if args.manifest is not None:
        manifest = Manifest.load(args.manifest)
        days = tuple(parse_day(d, "manifest day") for d in manifest.data["periods"]["days"])
        spec = OfflineSpec(
            users=manifest.data["options"]["users"], days=days, seed=manifest.data["options"]["seed"]
        )
    else:
        until = parse_day(args.until, "--until") if args.until else dt.datetime.now(dt.UTC).date()
        if not 1 <= args.days <= 366:
            raise ConfigError(f"--days {args.days} must be between 1 and 366")
        days = tuple(until - dt.timedelta(days=i) for i in reversed(range(args.days)))
        spec = OfflineSpec(users=args.users, days=days, seed=args.seed)
    spec = OfflineSpec(spec.users, spec.days, spec.seed, database=args.database).validate()
    catalog = load_catalog(settings.schemas_dir)
    spark = build_session(settings, "widehouse-generate-offline")
    counts = generate_offline(spark, spec, catalog.sql_dir)
    print(render(("Hive table", "rows"), [(f"{spec.database}.{name}", n) for name, n in counts.items()]))
    print(f"days: {', '.join(d.isoformat() for d in spec.days)}; users: {spec.users}; seed: {spec.seed}")
    if args.aggregate:
        for table in catalog.wide_tables:
            if table.offline:
                frame = offline_frame(spark, catalog, table, spec.days[-1], spec.database)
                print(f"\n{table.name} offline columns for {spec.days[-1]}: {frame.count()} rows")
                frame.orderBy(table.key_name).show(5, truncate=False)
    return 0

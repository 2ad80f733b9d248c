"""``widehouse catalog check|ddl|show``: validate the catalog, generate ClickHouse DDL, inspect entries."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path
from typing import Any

from widehouse.catalog.loader import load_catalog
from widehouse.catalog.model import Catalog, Topic, WideTable
from widehouse.catalog.schema import final_columns, hbase_columns, partial_columns
from widehouse.clickhouse import ddl
from widehouse.commands.command import add_command
from widehouse.commands.table import render
from widehouse.errors import CatalogError
from widehouse.settings import Settings


def register(subparsers: Any) -> None:
    parser = add_command(
        subparsers, "catalog", None, help="validate the catalog, generate DDL, inspect topics and tables"
    )
    commands = parser.add_subparsers(dest="catalog_command", metavar="ACTION", required=True)

    check = add_command(
        commands, "check", run_check, help="load and validate every topic and wide table; print a summary"
    )
    _catalog_options(check)
    check.add_argument(
        "--against-pulsar",
        action="store_true",
        help="also compare every topic's fields with Pulsar's schema registry; exit 1 on differences",
    )

    gen = add_command(
        commands, "ddl", run_ddl, help="write the ClickHouse DDL of every wide table (sql/clickhouse/)"
    )
    _catalog_options(gen)
    gen.add_argument("--database", help="ClickHouse database in the statements (default: the configured one)")
    gen.add_argument(
        "--cluster",
        help="ClickHouse cluster for ON CLUSTER DDL, replicated and Distributed tables "
        "(default: WIDEHOUSE_CLICKHOUSE_CLUSTER; `none` for one server)",
    )
    gen.add_argument("--out", type=Path, help="directory for <table>.sql (default: <sql dir>/clickhouse)")
    gen.add_argument("--stdout", action="store_true", help="print the statements instead of writing files")
    gen.add_argument("--check", action="store_true", help="fail if the files on disk differ from the catalog")
    gen.add_argument(
        "--apply", action="store_true", help="also create / evolve the tables in the configured ClickHouse"
    )

    show = add_command(
        commands, "show", run_show, help="show one topic (full name) or wide table: schema and mappings"
    )
    _catalog_options(show)
    show.add_argument("name", help="persistent://tenant/namespace/topic, or a wide table name")


def _catalog_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--schemas", type=Path, help="catalog directory (default: WIDEHOUSE_SCHEMAS_DIR)")
    parser.add_argument(
        "--sql", type=Path, help="SQL directory (default: the schemas directory's sibling sql/)"
    )


def _load(args: argparse.Namespace, settings: Settings) -> Catalog:
    return load_catalog(args.schemas or settings.schemas_dir, args.sql)


def run_check(args: argparse.Namespace, settings: Settings) -> int:
    catalog = _load(args, settings)
    namespaces = Counter(f"{t.name.tenant}/{t.name.namespace}" for t in catalog.topics)
    tenants = {t.name.tenant for t in catalog.topics}
    print(
        f"catalog {catalog.name!r} at {catalog.root} is valid: {len(catalog.topics)} topics in "
        f"{len(namespaces)} namespaces of {len(tenants)} tenants; fingerprint {catalog.fingerprint}"
    )
    print()
    print(render(("namespace", "topics"), sorted(namespaces.items())))
    print()
    rows = [
        (
            t.name,
            t.grain,
            f"{t.key_name} {t.key_type}",
            len(t.columns),
            len(t.offline_columns),
            len(catalog.topics_for(t.name)),
        )
        for t in catalog.wide_tables
    ]
    print(render(("wide table", "grain", "key", "stream columns", "offline columns", "topics"), rows))
    idle = [str(t.name) for t in catalog.topics if not t.mappings]
    if idle:
        print(f"\nnote: {len(idle)} topics fill no column: {', '.join(idle)}")
    if args.against_pulsar:
        return _check_registry(catalog, settings)
    return 0


def _check_registry(catalog: Catalog, settings: Settings) -> int:
    from widehouse.catalog.registry_check import check_against_registry
    from widehouse.pulsar.admin import PulsarAdmin

    with PulsarAdmin(settings.pulsar) as admin:
        differences = check_against_registry(catalog, admin)
    print()
    if not differences:
        print(
            f"the schema registry at {settings.pulsar.display_admin_url} matches all "
            f"{len(catalog.topics)} topics"
        )
        return 0
    rows = [(d.topic, d.kind, d.field, d.catalog, d.registry) for d in differences]
    print(render(("topic", "difference", "field", "catalog", "registry"), rows))
    topics = len({d.topic for d in differences})
    print(f"\n{len(differences)} difference(s) in {topics} of {len(catalog.topics)} topics")
    return 1


def run_ddl(args: argparse.Namespace, settings: Settings) -> int:
    from widehouse import clickhouse

    catalog = _load(args, settings)
    database = args.database or clickhouse.database_name(settings.clickhouse)
    cluster = settings.clickhouse.cluster if args.cluster is None else args.cluster
    cluster = None if cluster in ("", "none") else cluster
    files = {f"{t.name}.sql": ddl.render_sql_file(t, database, cluster=cluster) for t in catalog.wide_tables}
    if args.stdout:
        print("\n".join(files.values()))
    else:
        out = args.out or catalog.sql_dir / "clickhouse"
        stale = [name for name, text in files.items() if _read(out / name) != text]
        if args.check:
            if stale:
                print(f"out of date in {out}: {', '.join(stale)}; run `widehouse catalog ddl`")
                return 1
            print(f"{len(files)} DDL files in {out} match the catalog")
        else:
            out.mkdir(parents=True, exist_ok=True)
            for name, text in files.items():
                (out / name).write_text(text, encoding="utf-8")
            print(f"wrote {len(files)} files to {out} ({len(stale)} changed)")
    if args.apply:
        client = clickhouse.connect(settings.clickhouse)
        statements = ddl.apply_ddl(client, catalog, database, cluster=cluster)
        print(
            f"applied {len(statements)} statements to {settings.clickhouse.display_dsn} database {database}"
        )
    return 0


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return None


def run_show(args: argparse.Namespace, settings: Settings) -> int:
    catalog = _load(args, settings)
    if "://" in args.name:
        _show_topic(catalog.topic(args.name))
        return 0
    try:
        table = catalog.table(args.name)
    except CatalogError:
        raise CatalogError(
            f"{args.name!r} is neither a wide table nor a full topic name (persistent://tenant/ns/topic)"
        ) from None
    _show_table(catalog, table)
    return 0


def _show_topic(topic: Topic) -> None:
    print(f"{topic.name}  ({topic.file})")
    if topic.description:
        print(topic.description)
    print(
        f"key {topic.key}, event time {topic.event_time}, weight {topic.traffic.weight}, "
        f"partitions {topic.traffic.partitions}"
    )
    print(f"\nSpark schema: {topic.spark_ddl()}\n")
    rows = [
        (m.table, m.column, m.agg, m.field_name or "", m.value_type, m.filter.text if m.filter else "")
        for m in topic.mappings
    ]
    print(render(("table", "column", "aggregate", "field", "type", "filter"), rows))


def _show_table(catalog: Catalog, table: WideTable) -> None:
    names = ddl.table_names(table)
    print(f"{table.name}  ({table.file}): one row per {table.key_name} per {table.grain}")
    print(
        f"ClickHouse: {names.partial} (partials), {names.merged} (view), {names.final}, {names.view} (view)\n"
    )
    partial = {c.name: c.spark_type for c in partial_columns(table)}
    final = {c.name: c.spark_type for c in final_columns(table)}
    hbase = hbase_columns(table) if table.grain == "day" else {}
    rows: list[tuple[str, ...]] = []
    for column in table.columns:
        producers = catalog.producers(table.name, column.name)
        rows.append(
            (
                column.name,
                column.agg,
                final[column.name],
                partial[column.name],
                ddl.partial_type(column),
                hbase.get(column.name, b"").decode(),
                str(len(producers)),
            )
        )
    for offline in table.offline_columns:
        rows.append(
            (
                offline.name,
                f"offline:{offline.source}",
                final[offline.name],
                "",
                "",
                hbase.get(offline.name, b"").decode(),
                "",
            )
        )
    print(
        render(
            ("column", "aggregate", "type", "partial (Spark)", "partial (ClickHouse)", "HBase", "topics"),
            rows,
        )
    )

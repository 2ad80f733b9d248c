"""ClickHouse DDL for a cluster (``WIDEHOUSE_CLICKHOUSE_CLUSTER``): hand-written expected statements
for one table of each kind, and every generated statement parsed (never executed) by chDB's own
parser, so it is valid ClickHouse. The local service refuses replicated engines and ON CLUSTER, and
no replicated server runs here; the argument for the runtime half is in the notes (issue 27)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import chdb
import pytest
from catalog_samples import Writer

from widehouse.catalog import Catalog, load_catalog
from widehouse.clickhouse import analyst, ddl
from widehouse.contracts.tables import (
    BATCH_SHAPES,
    LEASE_SHAPE,
    LEDGER_SHAPE,
    PROGRESS_SHAPE,
    PUBLICATION_SHAPE,
    RECONCILIATION_SHAPE,
    STREAM_SHAPES,
)
from widehouse.errors import CatalogError

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def catalog(write_catalog: Writer) -> Catalog:
    return load_catalog(write_catalog())


def parse(statement: str) -> str:
    """chDB's formatting of ``statement``: parsing only (a syntax error raises), nothing runs."""
    text = statement.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t")  # a TSV value
    result = chdb.query("SELECT formatQuery({q:String})", "TabSeparatedRaw", params={"q": text})
    return str(result.data())


def test_sharded_partial_table_is_replicated_per_shard(catalog: Catalog) -> None:
    statement = ddl.partial_table_ddl(catalog.table("shop_hourly"), "wh", cluster="c1")
    assert statement == (
        "CREATE TABLE IF NOT EXISTS `wh`.`shop_hourly_partial_local` ON CLUSTER 'c1'\n(\n"
        "    `uid` Int64,\n"
        "    `hour` DateTime('UTC'),\n"
        "    `orders` SimpleAggregateFunction(sum, UInt64) DEFAULT 0,\n"
        "    `spent` SimpleAggregateFunction(sum, Nullable(Float64)),\n"
        "    `last_city` SimpleAggregateFunction(max, Tuple(ts DateTime64(3, 'UTC'), v String)) "
        "DEFAULT (toDateTime64(0, 3, 'UTC'), ''),\n"
        "    `big_orders` SimpleAggregateFunction(sum, UInt64) DEFAULT 0\n"
        ")\n"
        "ENGINE = ReplicatedAggregatingMergeTree("
        "'/clickhouse/tables/{shard}/wh/shop_hourly_partial_local', '{replica}')\n"
        "PARTITION BY toYYYYMMDD(`hour`)\n"
        "ORDER BY (`uid`, `hour`)\n"
        "SETTINGS replicated_deduplication_window = 10000"
    )


def test_final_table_keeps_its_version_order_on_replicas(catalog: Catalog) -> None:
    statement = ddl.final_table_ddl(catalog.table("shop_daily"), "wh", cluster="c1")
    assert statement.startswith("CREATE TABLE IF NOT EXISTS `wh`.`shop_daily_final_local` ON CLUSTER 'c1'\n(")
    assert statement.endswith(
        "ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/wh/shop_daily_final_local', "
        "'{replica}')\n"
        "PARTITION BY toYYYYMM(`day`)\n"
        "ORDER BY (`uid`, `day`, `finalized_at`)\n"
        "SETTINGS replicated_deduplication_window = 10000"
    )


def test_distributed_table_keeps_the_name_readers_and_writers_use(catalog: Catalog) -> None:
    statement = ddl.distributed_ddl(catalog.table("shop_hourly"), "shop_hourly_partial", "wh", "c1")
    assert statement == (
        "CREATE TABLE IF NOT EXISTS `wh`.`shop_hourly_partial` ON CLUSTER 'c1'\n"
        "AS `wh`.`shop_hourly_partial_local`\n"
        "ENGINE = Distributed('c1', 'wh', 'shop_hourly_partial_local', cityHash64(`uid`))"
    )


def test_internal_tables_are_one_replicated_copy_on_every_node() -> None:
    assert ddl.shape_ddl(LEASE_SHAPE, "wh", cluster="c1") == (
        "CREATE TABLE IF NOT EXISTS `wh`.`publish_leases` ON CLUSTER 'c1'\n(\n"
        "    `table` LowCardinality(String),\n"
        "    `period` DateTime64(3, 'UTC'),\n"
        "    `generation` UInt64,\n"
        "    `event` LowCardinality(String),\n"
        "    `holder` String,\n"
        "    `host` String,\n"
        "    `pid` UInt64,\n"
        "    `at` DateTime64(3, 'UTC'),\n"
        "    `expires_at` DateTime64(3, 'UTC')\n"
        ")\n"
        "ENGINE = ReplicatedMergeTree('/clickhouse/tables/all/wh/publish_leases', '{shard}-{replica}')\n"
        "PARTITION BY toYYYYMMDD(`period`)\n"
        "ORDER BY (`table`, `period`, `generation`)\n"
        "SETTINGS replicated_deduplication_window = 10000"
    )
    # an engine with a version column keeps it after the Keeper path and the replica name
    assert (
        "ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/all/wh/stream_progress', "
        "'{shard}-{replica}', `committed_at`)\n"
    ) in ddl.shape_ddl(PROGRESS_SHAPE, "wh", cluster="c1")


def test_analyst_view_reads_the_distributed_tables_with_one_ledger_snapshot(catalog: Catalog) -> None:
    view = ddl.analyst_view_ddl(catalog.table("shop_daily"), "wh", cluster="c1")
    assert view.startswith("CREATE OR REPLACE VIEW `wh`.`shop_daily` ON CLUSTER 'c1' AS\n")
    assert (
        "FROM `wh`.`shop_daily_final`\nWHERE (`day`, `finalized_at`) GLOBAL IN\n"
        "    (SELECT toDate(`period`), max(`finalized_at`) FROM `wh`.`finalized_periods` "
        "WHERE `table` = 'shop_daily' GROUP BY `period`)"
    ) in view
    assert (
        "FROM `wh`.`shop_daily_merged`\n"
        "WHERE `day` GLOBAL NOT IN (SELECT toDate(`period`) FROM `wh`.`finalized_periods` "
        "WHERE `table` = 'shop_daily')"
    ) in view
    merged = ddl.merged_view_ddl(catalog.table("shop_daily"), "wh", cluster="c1")
    assert merged.startswith("CREATE OR REPLACE VIEW `wh`.`shop_daily_merged` ON CLUSTER 'c1' AS\n")
    assert "FROM `wh`.`shop_daily_partial` AS p\n" in merged  # the Distributed table


def test_creation_order_puts_local_tables_before_distributed_ones(catalog: Catalog) -> None:
    statements = ddl.table_ddl(catalog.table("shop_hourly"), "wh", cluster="c1")
    heads = [s.split("\n")[0] for s in statements]
    assert heads == [
        "CREATE TABLE IF NOT EXISTS `wh`.`shop_hourly_partial_local` ON CLUSTER 'c1'",
        "CREATE TABLE IF NOT EXISTS `wh`.`shop_hourly_final_local` ON CLUSTER 'c1'",
        "CREATE TABLE IF NOT EXISTS `wh`.`shop_hourly_partial` ON CLUSTER 'c1'",
        "CREATE TABLE IF NOT EXISTS `wh`.`shop_hourly_final` ON CLUSTER 'c1'",
        "CREATE TABLE IF NOT EXISTS `wh`.`finalized_periods` ON CLUSTER 'c1'",
        "CREATE OR REPLACE VIEW `wh`.`shop_hourly_merged` ON CLUSTER 'c1' AS",
        "CREATE OR REPLACE VIEW `wh`.`shop_hourly` ON CLUSTER 'c1' AS",
    ]
    assert ddl.table_count("c1") == 4 and ddl.table_count(None) == 2


def test_without_a_cluster_nothing_changes(catalog: Catalog) -> None:
    for table in catalog.wide_tables:
        statements = ddl.table_ddl(table, "wh", cluster=None)
        assert statements == ddl.table_ddl(table, "wh")
        assert not any("CLUSTER" in s or "Replicated" in s or "Distributed" in s for s in statements)
    assert ddl.drop_statements("quarantine", "wh") == ["DROP TABLE IF EXISTS `wh`.`quarantine`"]
    assert ddl.database_ddl("wh") == "CREATE DATABASE IF NOT EXISTS `wh`"


def test_every_generated_cluster_statement_parses_as_clickhouse(catalog: Catalog) -> None:
    statements = [ddl.database_ddl("wh", cluster="prod-ch.1")]
    for table in catalog.wide_tables:
        statements += ddl.table_ddl(table, "wh", cluster="prod-ch.1")
        statements += [
            ddl.add_column_statement(table, target, column, "wh", cluster="prod-ch.1")
            for target, columns in ddl.expected_columns(table, cluster="prod-ch.1").items()
            for column in columns
            if column not in (table.key_name, "hour", table.period, "finalized_at")
        ]
        statements.append(ddl.scratch_table_ddl(table, "scratch_1", cluster="prod-ch.1"))
    statements += [
        ddl.shape_ddl(shape, "wh", cluster="prod-ch.1") for shape in (*STREAM_SHAPES, *BATCH_SHAPES)
    ]
    statements += ddl.drop_statements("shop_hourly_partial", "wh", cluster="prod-ch.1")
    statements += [
        ddl.shape_add_column_ddl(shape, "airflow_run", "wh", cluster="prod-ch.1")
        for shape in (LEDGER_SHAPE, PUBLICATION_SHAPE)
    ]
    for statement in statements:
        formatted = parse(statement)
        assert (
            "ON CLUSTER `prod-ch.1`" in formatted
            or "ON CLUSTER 'prod-ch.1'" in formatted
            or (statement.startswith("CREATE TABLE IF NOT EXISTS `scratch_1`"))
        ), statement


def test_the_parser_check_rejects_broken_sql() -> None:
    with pytest.raises(RuntimeError, match="Syntax error"):
        parse("CREATE TABLE `wh`.`t` ON CLUSTER 'c' (x UInt8) ENGINE = ReplicatedMergeTree('/p', '{replica}'")


def test_generated_objects_for_the_real_catalog_parse_on_a_cluster() -> None:
    real = load_catalog(REPO / "schemas")
    for table in real.wide_tables:
        text = ddl.render_sql_file(table, "wh", cluster="c1")
        assert text.splitlines()[2] == (
            f"-- Objects on cluster c1: {table.name}_partial_local, {table.name}_final_local, "
            f"{table.name}_partial, {table.name}_merged, {table.name}_final, {table.name}."
        )
        for statement in ddl.table_ddl(table, "wh", cluster="c1"):
            parse(statement)
    for path in analyst.view_files(REPO / "sql"):
        statement = analyst.view_statement(path, "c1")
        assert " ON CLUSTER 'c1' AS\n" in statement
        parse(statement)
        assert "CLUSTER" not in analyst.view_statement(path)


def test_scratch_table_is_never_a_copy_of_a_distributed_or_replicated_table(catalog: Catalog) -> None:
    table = catalog.table("shop_hourly")
    assert ddl.scratch_table_ddl(table, "s1") == "CREATE TABLE IF NOT EXISTS `s1` AS `shop_hourly_partial`"
    assert ddl.scratch_table_ddl(table, "s1", cluster="c1") == (
        "CREATE TABLE IF NOT EXISTS `s1` AS `shop_hourly_partial_local`\n"
        "ENGINE = AggregatingMergeTree\n"
        "PARTITION BY toYYYYMMDD(`hour`)\n"
        "ORDER BY (`uid`, `hour`)"
    )


def test_columns_are_added_to_the_local_table_then_the_distributed_one(catalog: Catalog) -> None:
    table = catalog.table("shop_hourly")
    targets = list(ddl.expected_columns(table, cluster="c1"))
    assert targets == [
        "shop_hourly_partial_local",
        "shop_hourly_final_local",
        "shop_hourly_partial",
        "shop_hourly_final",
    ]
    assert ddl.add_column_statement(table, "shop_hourly_partial_local", "orders", "wh", cluster="c1") == (
        "ALTER TABLE `wh`.`shop_hourly_partial_local` ON CLUSTER 'c1' ADD COLUMN IF NOT EXISTS "
        "`orders` SimpleAggregateFunction(sum, UInt64) DEFAULT 0"
    )
    assert ddl.add_column_statement(table, "shop_hourly_final", "orders", "wh", cluster="c1") == (
        "ALTER TABLE `wh`.`shop_hourly_final` ON CLUSTER 'c1' ADD COLUMN IF NOT EXISTS `orders` UInt64"
    )
    assert ddl.drop_statements("shop_hourly_partial", "wh", cluster="c1") == [
        "DROP TABLE IF EXISTS `wh`.`shop_hourly_partial` ON CLUSTER 'c1' SYNC",
        "DROP TABLE IF EXISTS `wh`.`shop_hourly_partial_local` ON CLUSTER 'c1' SYNC",
    ]


def test_a_column_a_shape_gained_is_added_on_every_node() -> None:
    assert ddl.shape_add_column_ddl(LEDGER_SHAPE, "airflow_run", "wh", cluster="c1") == (
        "ALTER TABLE `wh`.`finalized_periods` ON CLUSTER 'c1' ADD COLUMN IF NOT EXISTS `airflow_run` String"
    )
    assert ddl.shape_add_column_ddl(LEDGER_SHAPE, "kind", "wh") == (
        "ALTER TABLE `wh`.`finalized_periods` ADD COLUMN IF NOT EXISTS `kind` LowCardinality(String)"
    )
    # what system.columns says is there: an old ledger without airflow_run, a whole publications
    # table, no reconciliation table (not created: skipped, never half-added)
    present = [("finalized_periods", c) for c in LEDGER_SHAPE.names if c != "airflow_run"]
    present += [("publications", c) for c in PUBLICATION_SHAPE.names]
    shapes = [LEDGER_SHAPE, PUBLICATION_SHAPE, RECONCILIATION_SHAPE]
    assert ddl.missing_shape_columns(shapes, present) == [(LEDGER_SHAPE, "airflow_run")]


@pytest.mark.parametrize("name", ["c'1", "c 1", "", "1c", "c;DROP", "c`1"])
def test_a_bad_cluster_name_is_refused_by_name(catalog: Catalog, name: str) -> None:
    with pytest.raises(CatalogError, match="ClickHouse cluster name"):
        ddl.table_ddl(catalog.table("shop_hourly"), "wh", cluster=name)


def test_only_merge_tree_engines_become_replicated() -> None:
    assert ddl.replicated_engine("MergeTree", "/p", "{replica}") == "ReplicatedMergeTree('/p', '{replica}')"
    for engine in ("Log", "ReplicatedMergeTree('/p', 'r')", "Memory"):
        with pytest.raises(CatalogError, match="cannot make a replicated engine"):
            ddl.replicated_engine(engine, "/p", "{replica}")


def _ddl_command(*args: str, cluster: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "WIDEHOUSE_CLICKHOUSE_CLUSTER"}
    if cluster is not None:
        env["WIDEHOUSE_CLICKHOUSE_CLUSTER"] = cluster
    return subprocess.run(
        [sys.executable, "-m", "widehouse", "catalog", "ddl", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_the_ddl_command_takes_the_cluster_from_settings() -> None:
    clustered = _ddl_command("--stdout", cluster="c9")
    assert clustered.returncode == 0, clustered.stderr
    assert "CREATE TABLE IF NOT EXISTS `wh`.`user_hourly_partial_local` ON CLUSTER 'c9'\n" in clustered.stdout
    assert (
        "ENGINE = Distributed('c9', 'wh', 'user_hourly_partial_local', cityHash64(`uid`))" in clustered.stdout
    )
    # --cluster overrides it; `none` is one server, exactly the committed files
    assert "ON CLUSTER 'c8'" in _ddl_command("--stdout", "--cluster", "c8", cluster="c9").stdout
    check = _ddl_command("--check", "--cluster", "none", cluster="c9")
    assert check.returncode == 0, check.stdout + check.stderr
    assert _ddl_command("--check", cluster="c9").returncode == 1
    assert _ddl_command("--check", cluster=None).returncode == 0

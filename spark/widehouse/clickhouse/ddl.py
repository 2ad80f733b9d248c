"""ClickHouse DDL: the catalog's wide tables and the pipeline's declared shapes (deterministic; the
database is a parameter). This module is the only place that writes ClickHouse DDL.

Pipeline tables (quarantine, late events, progress, ...) are :class:`~widehouse.shape.Shape`
objects rendered by :func:`shape_ddl`.

For a wide table ``T`` (key ``K``, grain hour or day) there are four objects:

``T_partial``  AggregatingMergeTree, ORDER BY (K, hour), PARTITION BY toYYYYMMDD(hour). What the
               streaming job inserts: one partial row per (K, hour) per micro-batch, for day tables
               too. Columns are SimpleAggregateFunction, merged by the engine (see below). Insert
               deduplication tokens work (``non_replicated_deduplication_window``).
``T_merged``   view: partials merged to final values at the table's grain (hour, or day = toDate(hour)).
``T_final``    ReplacingMergeTree(finalized_at) at the table's grain: what the finalize (hourly) or
               extract (daily) job writes; a daily table adds its offline (Hive) columns here.
``T``          the analyst view: finalized rows, plus live merged rows for periods after the last
               finalized one (offline columns null there).

Partial columns (the mergeable representation; Spark/Delta use the same shapes, see
:mod:`widehouse.catalog.schema`):

========= ================================================================ ========================
aggregate ClickHouse partial column                                        empty partial
========= ================================================================ ========================
count     SimpleAggregateFunction(sum, UInt64)                             0
sum       SimpleAggregateFunction(sum, Nullable(Int64|Float64))            NULL
min, max  SimpleAggregateFunction(min|max, Nullable(T))                    NULL
first     SimpleAggregateFunction(min, Tuple(ts DateTime64(3,'UTC'), v T)) (2299-12-31 23:59:59.999, .)
last      SimpleAggregateFunction(max, Tuple(ts DateTime64(3,'UTC'), v T)) (1970-01-01 00:00:00.000, .)
========= ================================================================ ========================

(``.`` is the type's default value: 0, '' or false.)

Pairs are plain tuples (no ``Nullable(Tuple)``, which needs a beta setting on servers): an empty
pair is a sentinel that never wins the merge, and it is each column's DEFAULT, so inserting NULL
(e.g. a null Arrow struct) stores the sentinel. The merged view turns a sentinel back into NULL.
Every identifier comes from the validated catalog and is backtick-quoted.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from widehouse.catalog.model import Catalog, WideColumn, WideTable
from widehouse.contracts.tables import LEDGER, LEDGER_SHAPE
from widehouse.contracts.types import CLICKHOUSE_TYPES
from widehouse.errors import CatalogError
from widehouse.shape import TYPES, Shape


class DdlClient(Protocol):
    """What :func:`apply_ddl` needs of a client (:class:`widehouse.clickhouse.client.ClickHouse`)."""

    def command(self, sql: str, parameters: Mapping[str, Any] | None = None) -> Any: ...

    def rows(self, sql: str, parameters: Mapping[str, Any] | None = None) -> list[tuple[Any, ...]]: ...


DEDUP_WINDOW = 10_000
_DATABASE_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_LAST_EMPTY_SQL = "toDateTime64(0, 3, 'UTC')"
_FIRST_EMPTY_SQL = "toDateTime64('2299-12-31 23:59:59.999', 3, 'UTC')"
_TYPE_DEFAULTS = {
    "long": "0",
    "int": "0",
    "double": "0",
    "string": "''",
    "boolean": "false",
    "timestamp-ms": "toDateTime64(0, 3, 'UTC')",
}


@dataclass(frozen=True)
class TableNames:
    """The ClickHouse objects of one wide table."""

    partial: str
    merged: str
    final: str
    view: str


def table_names(table: WideTable) -> TableNames:
    return TableNames(
        partial=f"{table.name}_partial",
        merged=f"{table.name}_merged",
        final=f"{table.name}_final",
        view=table.name,
    )


def q(name: str) -> str:
    """Backtick-quote a validated identifier."""
    return f"`{name}`"


def _db(database: str) -> str:
    if not _DATABASE_RE.fullmatch(database):
        raise CatalogError(f"ClickHouse database name {database!r} is not a plain identifier")
    return q(database)


def key_type(table: WideTable) -> str:
    return CLICKHOUSE_TYPES[table.key_type]


def value_type(type_name: str) -> str:
    return CLICKHOUSE_TYPES[type_name]


def partial_type(column: WideColumn) -> str:
    """The SimpleAggregateFunction type of a column in the partial table."""
    base = value_type(column.value_type)
    if column.agg == "count":
        return "SimpleAggregateFunction(sum, UInt64)"
    if column.is_pair:
        return f"SimpleAggregateFunction({column.merge_function}, Tuple(ts DateTime64(3, 'UTC'), v {base}))"
    return f"SimpleAggregateFunction({column.merge_function}, Nullable({base}))"


def partial_default(column: WideColumn) -> str | None:
    """The DEFAULT expression of a partial column (its empty value), or None (NULL)."""
    if column.agg == "count":
        return "0"
    if column.agg == "first":
        return f"({_FIRST_EMPTY_SQL}, {_TYPE_DEFAULTS[column.value_type]})"
    if column.agg == "last":
        return f"({_LAST_EMPTY_SQL}, {_TYPE_DEFAULTS[column.value_type]})"
    return None


def final_type(column: WideColumn) -> str:
    """Type of a column in final tables and views: counts are never null, everything else may be."""
    if column.agg == "count":
        return "UInt64"
    return f"Nullable({value_type(column.value_type)})"


def merge_expression(column: WideColumn, source: str = "p") -> str:
    """The aggregate expression that merges a partial column into its final value."""
    ref = f"{source}.{q(column.name)}"
    if column.agg == "first":
        merged = f"min({ref})"
        return f"if(tupleElement({merged}, 'ts') = {_FIRST_EMPTY_SQL}, NULL, tupleElement({merged}, 'v'))"
    if column.agg == "last":
        merged = f"max({ref})"
        return f"if(tupleElement({merged}, 'ts') = {_LAST_EMPTY_SQL}, NULL, tupleElement({merged}, 'v'))"
    return f"{column.merge_function}({ref})"


def _columns_block(lines: list[str]) -> str:
    return "(\n" + ",\n".join(f"    {line}" for line in lines) + "\n)"


def partial_table_ddl(table: WideTable, database: str, dedup_window: int = DEDUP_WINDOW) -> str:
    db, names, key = _db(database), table_names(table), q(table.key_name)
    lines = [f"{key} {key_type(table)}", "`hour` DateTime('UTC')"]
    for column in table.columns:
        default = partial_default(column)
        lines.append(f"{q(column.name)} {partial_type(column)}" + (f" DEFAULT {default}" if default else ""))
    return (
        f"CREATE TABLE IF NOT EXISTS {db}.{q(names.partial)}\n{_columns_block(lines)}\n"
        "ENGINE = AggregatingMergeTree\n"
        "PARTITION BY toYYYYMMDD(`hour`)\n"
        f"ORDER BY ({key}, `hour`)\n"
        f"SETTINGS non_replicated_deduplication_window = {int(dedup_window)}"
    )


def merged_view_ddl(table: WideTable, database: str) -> str:
    db, names, key = _db(database), table_names(table), q(table.key_name)
    period = "p.`hour`" if table.grain == "hour" else "toDate(p.`hour`)"
    select = [f"p.{key} AS {key}", f"{period} AS {q(table.period)}"]
    select += [f"{merge_expression(c)} AS {q(c.name)}" for c in table.columns]
    body = ",\n    ".join(select)
    return (
        f"CREATE OR REPLACE VIEW {db}.{q(names.merged)} AS\n"
        f"SELECT\n    {body}\n"
        f"FROM {db}.{q(names.partial)} AS p\n"
        f"GROUP BY p.{key}, {period}"
    )


def final_table_ddl(table: WideTable, database: str, dedup_window: int = DEDUP_WINDOW) -> str:
    db, names, key = _db(database), table_names(table), q(table.key_name)
    period_type = "DateTime('UTC')" if table.grain == "hour" else "Date"
    lines = [f"{key} {key_type(table)}", f"{q(table.period)} {period_type}"]
    lines += [f"{q(c.name)} {final_type(c)}" for c in table.columns]
    lines += [f"{q(c.name)} Nullable({value_type(c.type)})" for c in table.offline_columns]
    lines.append("`finalized_at` DateTime64(3, 'UTC')")
    partition = "toYYYYMMDD(`hour`)" if table.grain == "hour" else "toYYYYMM(`day`)"
    # Every publish of a period is a new version (its finalized_at); the ledger names the visible one.
    return (
        f"CREATE TABLE IF NOT EXISTS {db}.{q(names.final)}\n{_columns_block(lines)}\n"
        "ENGINE = ReplacingMergeTree\n"
        f"PARTITION BY {partition}\n"
        f"ORDER BY ({key}, {q(table.period)}, `finalized_at`)\n"
        f"SETTINGS non_replicated_deduplication_window = {int(dedup_window)}"
    )


def analyst_view_ddl(table: WideTable, database: str) -> str:
    db, names, key, period = _db(database), table_names(table), q(table.key_name), q(table.period)
    stream = [q(c.name) for c in table.columns]
    offline = [q(c.name) for c in table.offline_columns]
    finalized = ", ".join([key, period, *stream, *offline])
    live_offline = [
        f"CAST(NULL AS Nullable({value_type(c.type)})) AS {q(c.name)}" for c in table.offline_columns
    ]
    live = ", ".join([key, period, *stream, *live_offline])
    as_period = "toDateTime(`period`, 'UTC')" if table.grain == "hour" else "toDate(`period`)"
    ledger = f"{db}.{q(LEDGER)} WHERE `table` = '{table.name}'"
    return (
        f"CREATE OR REPLACE VIEW {db}.{q(names.view)} AS\n"
        f"SELECT {finalized}\nFROM {db}.{q(names.final)}\n"
        f"WHERE ({period}, `finalized_at`) IN\n"
        f"    (SELECT {as_period}, max(`finalized_at`) FROM {ledger} GROUP BY `period`)\n"
        "UNION ALL\n"
        f"SELECT {live}\nFROM {db}.{q(names.merged)}\n"
        f"WHERE {period} NOT IN (SELECT {as_period} FROM {ledger})"
    )


def shape_ddl(shape: Shape, database: str, dedup_window: int = DEDUP_WINDOW) -> str:
    """``CREATE TABLE IF NOT EXISTS`` of a declared shape, with a deduplication window for inserts."""
    lines = []
    for column in shape.columns:
        kind = TYPES[column.kind].clickhouse
        if column.nullable:
            kind = f"Nullable({kind})"
        if column.low_cardinality:
            kind = f"LowCardinality({kind})"
        lines.append(f"{q(column.name)} {kind}")
    order = ", ".join(q(n) for n in shape.order_by)
    return (
        f"CREATE TABLE IF NOT EXISTS {_db(database)}.{q(shape.name)}\n{_columns_block(lines)}\n"
        f"ENGINE = {shape.engine}\n"
        f"PARTITION BY toYYYYMMDD({q(shape.partition_by)})\n"
        f"ORDER BY ({order})\n"
        f"SETTINGS non_replicated_deduplication_window = {int(dedup_window)}"
    )


def table_ddl(table: WideTable, database: str, dedup_window: int = DEDUP_WINDOW) -> list[str]:
    """Every statement for one wide table, in creation order (tables before the views over them)."""
    return [
        partial_table_ddl(table, database, dedup_window),
        final_table_ddl(table, database, dedup_window),
        shape_ddl(LEDGER_SHAPE, database, dedup_window),  # the analyst view reads it
        merged_view_ddl(table, database),
        analyst_view_ddl(table, database),
    ]


def catalog_ddl(catalog: Catalog, database: str, dedup_window: int = DEDUP_WINDOW) -> dict[str, list[str]]:
    """Statements per wide table name, for every wide table of the catalog."""
    return {t.name: table_ddl(t, database, dedup_window) for t in catalog.wide_tables}


def expected_columns(table: WideTable) -> dict[str, dict[str, str]]:
    """Column name -> ClickHouse type, for the partial and the final table of ``table``."""
    names = table_names(table)
    partial = {table.key_name: key_type(table), "hour": "DateTime('UTC')"}
    partial.update({c.name: partial_type(c) for c in table.columns})
    final = {
        table.key_name: key_type(table),
        table.period: "DateTime('UTC')" if table.grain == "hour" else "Date",
    }
    final.update({c.name: final_type(c) for c in table.columns})
    final.update({c.name: f"Nullable({value_type(c.type)})" for c in table.offline_columns})
    final["finalized_at"] = "DateTime64(3, 'UTC')"
    return {names.partial: partial, names.final: final}


def add_column_statement(table: WideTable, target: str, column: str, database: str) -> str:
    """``ALTER TABLE ... ADD COLUMN IF NOT EXISTS`` for one catalog column of the partial or final table."""
    db, names = _db(database), table_names(table)
    if target == names.partial:
        wide = table.column(column)
        default = partial_default(wide)
        spec = partial_type(wide) + (f" DEFAULT {default}" if default else "")
    elif table.has_column(column):
        spec = final_type(table.column(column))
    else:
        offline = next(c for c in table.offline_columns if c.name == column)
        spec = f"Nullable({value_type(offline.type)})"
    return f"ALTER TABLE {db}.{q(target)} ADD COLUMN IF NOT EXISTS {q(column)} {spec}"


def apply_ddl(
    client: DdlClient, catalog: Catalog, database: str, dedup_window: int = DEDUP_WINDOW
) -> list[str]:
    """Create or evolve every wide table's objects through a clickhouse-connect client.

    Idempotent: tables are created if missing, columns the catalog gained are added (at the end;
    ClickHouse selects by name), views are replaced. A column whose type no longer matches the
    catalog (its aggregate or type changed) raises CatalogError: that needs a deliberate migration.
    Returns the statements run.
    """
    run: list[str] = [f"CREATE DATABASE IF NOT EXISTS {_db(database)}"]
    client.command(run[0])
    for table in catalog.wide_tables:
        create = table_ddl(table, database, dedup_window)
        for statement in create[:2]:
            client.command(statement)
            run.append(statement)
        for target, wanted in expected_columns(table).items():
            result = client.rows(_COLUMNS_QUERY, {"db": database, "t": target})
            present: dict[str, str] = {str(r[0]): str(r[1]) for r in result}
            for column, kind in wanted.items():
                if column not in present:
                    statement = add_column_statement(table, target, column, database)
                    client.command(statement)
                    run.append(statement)
                elif _normalize_type(present[column]) != _normalize_type(kind):
                    raise CatalogError(
                        f"{database}.{target}.{column} is {present[column]} but the catalog "
                        f"({table.file.name}) now makes it {kind}; migrate it deliberately (e.g. a new name)"
                    )
        for statement in create[2:]:
            client.command(statement)
            run.append(statement)
    return run


_COLUMNS_QUERY = "SELECT name, type FROM system.columns WHERE database = {db:String} AND table = {t:String}"


def _normalize_type(text: str) -> str:
    return text.replace(" ", "").replace('"', "'")


def render_sql_file(table: WideTable, database: str, dedup_window: int = DEDUP_WINDOW) -> str:
    """The content of ``sql/clickhouse/<table>.sql``: a header and the statements, each ending in ``;``."""
    header = (
        f"-- Generated by `widehouse catalog ddl` from the catalog ({table.file.name}); do not edit.\n"
        f"-- Wide table {table.name}: one row per {table.key_name} per {table.grain}; "
        f"{len(table.columns)} stream columns, {len(table.offline_columns)} offline columns.\n"
        f"-- Objects: {', '.join(vars(table_names(table)).values())}.\n"
    )
    return header + "\n" + "\n\n".join(s + ";" for s in table_ddl(table, database, dedup_window)) + "\n"

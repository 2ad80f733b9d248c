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

**On a cluster** (``WIDEHOUSE_CLICKHOUSE_CLUSTER``; every function takes ``cluster=``, None renders
exactly the single-server DDL above) every statement runs ``ON CLUSTER '<name>'`` and:

- a wide table's partial and final tables are sharded by key: ``T_partial_local`` and
  ``T_final_local`` are Replicated*MergeTree tables of each shard (Keeper path
  ``/clickhouse/tables/{shard}/<db>/<table>``, replica ``{replica}``), and ``T_partial`` / ``T_final``
  are Distributed tables over them with the deterministic sharding key ``cityHash64(<key>)``. Every
  reader and writer keeps using ``T_partial`` / ``T_final``: a replayed insert with the same rows is
  split the same way, so each shard deduplicates its own block by the same token;
- the pipeline's own tables (ledger, publications, leases, progress, sink marks, quarantine, ...)
  are not sharded: one replicated table with a full copy on every node (Keeper path
  ``/clickhouse/tables/all/<db>/<table>``, replica ``{shard}-{replica}``), so the idempotency records
  live in one Keeper-deduplicated, quorum-written sequence, and joins against them stay local;
- the views read the Distributed tables, and the analyst view picks the ledger's newest versions
  with ``GLOBAL IN`` (one ledger snapshot, taken on the node the query runs on, for every shard);
- ``replicated_deduplication_window`` (block ids kept in Keeper) replaces
  ``non_replicated_deduplication_window``.

Writes and reads of the idempotency records on a cluster (quorum inserts, sequentially consistent
reads) are the client's part: :mod:`widehouse.clickhouse.client`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from widehouse.catalog.model import Catalog, WideColumn, WideTable
from widehouse.contracts.tables import LEDGER, LEDGER_SHAPE, check_cluster_name
from widehouse.contracts.types import CLICKHOUSE_TYPES
from widehouse.errors import CatalogError
from widehouse.shape import TYPES, Col, Shape


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


_ENGINE_RE = re.compile(r"([A-Za-z]+)(?:\((.*)\))?", re.DOTALL)
LOCAL_SUFFIX = "_local"
"""The shard-local table behind a Distributed one on a cluster: ``T_partial`` reads ``T_partial_local``."""
KEEPER_ROOT = "/clickhouse/tables"


def check_cluster(name: str) -> str:
    """A cluster name fit for ``ON CLUSTER '<name>'`` (:func:`check_cluster_name`); CatalogError otherwise."""
    try:
        return check_cluster_name(name)
    except ValueError as exc:
        raise CatalogError(f"ClickHouse cluster name {name!r} {exc}") from exc


def _on(cluster: str | None) -> str:
    return "" if cluster is None else f" ON CLUSTER '{check_cluster(cluster)}'"


def local_name(name: str) -> str:
    """The shard-local table of a sharded (Distributed) table."""
    return f"{name}{LOCAL_SUFFIX}"


def replicated_engine(engine: str, keeper_path: str, replica: str) -> str:
    """``ReplacingMergeTree(`v`)`` -> ``ReplicatedReplacingMergeTree('<path>', '<replica>', `v`)``."""
    match = _ENGINE_RE.fullmatch(engine.strip())
    if match is None or not match.group(1).endswith("MergeTree") or match.group(1).startswith("Replicated"):
        raise CatalogError(f"cannot make a replicated engine of {engine!r}")
    args = [f"'{keeper_path}'", f"'{replica}'"]
    if match.group(2):
        args.append(match.group(2))
    return f"Replicated{match.group(1)}({', '.join(args)})"


def _sharded_engine(engine: str, database: str, name: str) -> str:
    """The engine of a shard-local table: one replica set per shard."""
    return replicated_engine(engine, f"{KEEPER_ROOT}/{{shard}}/{database}/{name}", "{replica}")


def _everywhere_engine(engine: str, database: str, name: str) -> str:
    """The engine of an unsharded table with a full copy on every node of the cluster."""
    return replicated_engine(engine, f"{KEEPER_ROOT}/all/{database}/{name}", "{shard}-{replica}")


def _dedup_setting(dedup_window: int, cluster: str | None) -> str:
    kind = "non_replicated" if cluster is None else "replicated"
    return f"SETTINGS {kind}_deduplication_window = {int(dedup_window)}"


def distributed_ddl(table: WideTable, name: str, database: str, cluster: str) -> str:
    """The Distributed table ``name`` over ``name_local`` of every shard, sharded by the table's key."""
    db = _db(database)
    return (
        f"CREATE TABLE IF NOT EXISTS {db}.{q(name)}{_on(cluster)}\n"
        f"AS {db}.{q(local_name(name))}\n"
        f"ENGINE = Distributed('{check_cluster(cluster)}', '{database}', '{local_name(name)}', "
        f"cityHash64({q(table.key_name)}))"
    )


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


def _placed(name: str, engine: str, database: str, cluster: str | None) -> tuple[str, str]:
    """A wide table's name and engine: as given on one server; on a cluster its shard-local
    replicated table (``<name>_local``) behind the Distributed table of ``name``."""
    if cluster is None:
        return name, engine
    local = local_name(name)
    return local, _sharded_engine(engine, database, local)


def partial_table_ddl(
    table: WideTable, database: str, dedup_window: int = DEDUP_WINDOW, *, cluster: str | None = None
) -> str:
    """The partial table (on a cluster: its shard-local replicated table, ``T_partial_local``)."""
    db, names, key = _db(database), table_names(table), q(table.key_name)
    lines = [f"{key} {key_type(table)}", "`hour` DateTime('UTC')"]
    for column in table.columns:
        default = partial_default(column)
        lines.append(f"{q(column.name)} {partial_type(column)}" + (f" DEFAULT {default}" if default else ""))
    name, engine = _placed(names.partial, "AggregatingMergeTree", database, cluster)
    return (
        f"CREATE TABLE IF NOT EXISTS {db}.{q(name)}{_on(cluster)}\n{_columns_block(lines)}\n"
        f"ENGINE = {engine}\n"
        "PARTITION BY toYYYYMMDD(`hour`)\n"
        f"ORDER BY ({key}, `hour`)\n"
        f"{_dedup_setting(dedup_window, cluster)}"
    )


def merged_view_ddl(table: WideTable, database: str, *, cluster: str | None = None) -> str:
    """The merged view (on a cluster: over the Distributed partial table; a key lives on one shard)."""
    db, names, key = _db(database), table_names(table), q(table.key_name)
    period = "p.`hour`" if table.grain == "hour" else "toDate(p.`hour`)"
    select = [f"p.{key} AS {key}", f"{period} AS {q(table.period)}"]
    select += [f"{merge_expression(c)} AS {q(c.name)}" for c in table.columns]
    body = ",\n    ".join(select)
    return (
        f"CREATE OR REPLACE VIEW {db}.{q(names.merged)}{_on(cluster)} AS\n"
        f"SELECT\n    {body}\n"
        f"FROM {db}.{q(names.partial)} AS p\n"
        f"GROUP BY p.{key}, {period}"
    )


def final_table_ddl(
    table: WideTable, database: str, dedup_window: int = DEDUP_WINDOW, *, cluster: str | None = None
) -> str:
    """The final table (on a cluster: its shard-local replicated table, ``T_final_local``)."""
    db, names, key = _db(database), table_names(table), q(table.key_name)
    period_type = "DateTime('UTC')" if table.grain == "hour" else "Date"
    lines = [f"{key} {key_type(table)}", f"{q(table.period)} {period_type}"]
    lines += [f"{q(c.name)} {final_type(c)}" for c in table.columns]
    lines += [f"{q(c.name)} Nullable({value_type(c.type)})" for c in table.offline_columns]
    lines.append("`finalized_at` DateTime64(3, 'UTC')")
    partition = "toYYYYMMDD(`hour`)" if table.grain == "hour" else "toYYYYMM(`day`)"
    name, engine = _placed(names.final, "ReplacingMergeTree", database, cluster)
    # Every publish of a period is a new version (its finalized_at); the ledger names the visible one.
    return (
        f"CREATE TABLE IF NOT EXISTS {db}.{q(name)}{_on(cluster)}\n{_columns_block(lines)}\n"
        f"ENGINE = {engine}\n"
        f"PARTITION BY {partition}\n"
        f"ORDER BY ({key}, {q(table.period)}, `finalized_at`)\n"
        f"{_dedup_setting(dedup_window, cluster)}"
    )


def analyst_view_ddl(table: WideTable, database: str, *, cluster: str | None = None) -> str:
    """The analyst view; on a cluster the ledger's versions go to every shard as one set (``GLOBAL``)."""
    db, names, key, period = _db(database), table_names(table), q(table.key_name), q(table.period)
    scope = "" if cluster is None else "GLOBAL "
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
        f"CREATE OR REPLACE VIEW {db}.{q(names.view)}{_on(cluster)} AS\n"
        f"SELECT {finalized}\nFROM {db}.{q(names.final)}\n"
        f"WHERE ({period}, `finalized_at`) {scope}IN\n"
        f"    (SELECT {as_period}, max(`finalized_at`) FROM {ledger} GROUP BY `period`)\n"
        "UNION ALL\n"
        f"SELECT {live}\nFROM {db}.{q(names.merged)}\n"
        f"WHERE {period} {scope}NOT IN (SELECT {as_period} FROM {ledger})"
    )


def shape_ddl(
    shape: Shape, database: str, dedup_window: int = DEDUP_WINDOW, *, cluster: str | None = None
) -> str:
    """``CREATE TABLE IF NOT EXISTS`` of a declared shape, with a deduplication window for inserts.

    On a cluster: one replicated table with a full copy on every node (never sharded)."""
    lines = [f"{q(column.name)} {shape_column_type(column)}" for column in shape.columns]
    order = ", ".join(q(n) for n in shape.order_by)
    engine = shape.engine if cluster is None else _everywhere_engine(shape.engine, database, shape.name)
    return (
        f"CREATE TABLE IF NOT EXISTS {_db(database)}.{q(shape.name)}{_on(cluster)}\n{_columns_block(lines)}\n"
        f"ENGINE = {engine}\n"
        f"PARTITION BY toYYYYMMDD({q(shape.partition_by)})\n"
        f"ORDER BY ({order})\n"
        f"{_dedup_setting(dedup_window, cluster)}"
    )


def shape_column_type(column: Col) -> str:
    """The ClickHouse type of a shape's column (``LowCardinality(Nullable(String))``, ...)."""
    kind = TYPES[column.kind].clickhouse
    if column.nullable:
        kind = f"Nullable({kind})"
    if column.low_cardinality:
        kind = f"LowCardinality({kind})"
    return kind


def shape_add_column_ddl(shape: Shape, column: str, database: str, *, cluster: str | None = None) -> str:
    """``ALTER TABLE ... ADD COLUMN IF NOT EXISTS`` of a column a shape gained after its table was
    created (existing rows read the type's default: '' , 0, false, or NULL when nullable). On a
    cluster ``ON CLUSTER``: every node's replica of the (unsharded) table gets it."""
    col = shape.column(column)
    return (
        f"ALTER TABLE {_db(database)}.{q(shape.name)}{_on(cluster)} "
        f"ADD COLUMN IF NOT EXISTS {q(col.name)} {shape_column_type(col)}"
    )


def missing_shape_columns(
    shapes: Iterable[Shape], present: Iterable[tuple[str, str]]
) -> list[tuple[Shape, str]]:
    """(shape, column) of every declared column absent from ``present`` ((table, column) pairs read
    from ``system.columns``), in declaration order. A table absent from ``present`` altogether is
    skipped (its ``CREATE`` has just made it whole, or failed)."""
    have: dict[str, set[str]] = {}
    for table, column in present:
        have.setdefault(str(table), set()).add(str(column))
    return [
        (shape, c.name)
        for shape in shapes
        if shape.name in have
        for c in shape.columns
        if c.name not in have[shape.name]
    ]


SHAPE_COLUMNS_QUERY = (
    "SELECT table, name FROM system.columns WHERE database = {db:String} AND table IN {t:Array(String)}"
)


def table_ddl(
    table: WideTable, database: str, dedup_window: int = DEDUP_WINDOW, *, cluster: str | None = None
) -> list[str]:
    """Every statement for one wide table, in creation order (tables before the views over them).

    The first :func:`table_count` statements create the partial and final tables (on a cluster:
    the shard-local tables, then the Distributed tables over them)."""
    names = table_names(table)
    tables = [
        partial_table_ddl(table, database, dedup_window, cluster=cluster),
        final_table_ddl(table, database, dedup_window, cluster=cluster),
    ]
    if cluster is not None:
        tables += [distributed_ddl(table, n, database, cluster) for n in (names.partial, names.final)]
    return [
        *tables,
        shape_ddl(LEDGER_SHAPE, database, dedup_window, cluster=cluster),  # the analyst view reads it
        merged_view_ddl(table, database, cluster=cluster),
        analyst_view_ddl(table, database, cluster=cluster),
    ]


def table_count(cluster: str | None) -> int:
    """How many of :func:`table_ddl`'s statements create the partial and final tables."""
    return 2 if cluster is None else 4


def catalog_ddl(
    catalog: Catalog, database: str, dedup_window: int = DEDUP_WINDOW, *, cluster: str | None = None
) -> dict[str, list[str]]:
    """Statements per wide table name, for every wide table of the catalog."""
    return {t.name: table_ddl(t, database, dedup_window, cluster=cluster) for t in catalog.wide_tables}


def expected_columns(table: WideTable, *, cluster: str | None = None) -> dict[str, dict[str, str]]:
    """Column name -> ClickHouse type, for the partial and the final table of ``table`` (on a cluster:
    the shard-local tables first, then the Distributed tables, which carry the same columns)."""
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
    if cluster is None:
        return {names.partial: partial, names.final: final}
    return {
        local_name(names.partial): partial,
        local_name(names.final): final,
        names.partial: partial,
        names.final: final,
    }


def add_column_statement(
    table: WideTable, target: str, column: str, database: str, *, cluster: str | None = None
) -> str:
    """``ALTER TABLE ... ADD COLUMN IF NOT EXISTS`` for one catalog column of the partial or final
    table (on a cluster ``target`` may be a shard-local table or the Distributed table over it)."""
    db, names = _db(database), table_names(table)
    base = target
    if cluster is not None and target.endswith(LOCAL_SUFFIX):
        base = target[: -len(LOCAL_SUFFIX)]
    if base == names.partial:
        wide = table.column(column)
        default = partial_default(wide)
        spec = partial_type(wide) + (f" DEFAULT {default}" if default else "")
    elif table.has_column(column):
        spec = final_type(table.column(column))
    else:
        offline = next(c for c in table.offline_columns if c.name == column)
        spec = f"Nullable({value_type(offline.type)})"
    return f"ALTER TABLE {db}.{q(target)}{_on(cluster)} ADD COLUMN IF NOT EXISTS {q(column)} {spec}"


def database_ddl(database: str, *, cluster: str | None = None) -> str:
    return f"CREATE DATABASE IF NOT EXISTS {_db(database)}{_on(cluster)}"


def drop_statements(name: str, database: str, *, cluster: str | None = None) -> list[str]:
    """``DROP TABLE IF EXISTS`` of a table or view; on a cluster also of its shard-local table, on
    every node, ``SYNC`` (a replicated table's Keeper path is free again when it returns)."""
    db = _db(database)
    if cluster is None:
        return [f"DROP TABLE IF EXISTS {db}.{q(name)}"]
    return [f"DROP TABLE IF EXISTS {db}.{q(n)}{_on(cluster)} SYNC" for n in (name, local_name(name))]


def apply_ddl(
    client: DdlClient,
    catalog: Catalog,
    database: str,
    dedup_window: int = DEDUP_WINDOW,
    *,
    cluster: str | None = None,
) -> list[str]:
    """Create or evolve every wide table's objects through a clickhouse-connect client.

    Idempotent: tables are created if missing, columns the catalog gained are added (at the end;
    ClickHouse selects by name), views are replaced; the ledger gets the columns its shape gained.
    A column whose type no longer matches the catalog (its aggregate or type changed) raises
    CatalogError: that needs a deliberate migration.
    On a cluster every statement runs ``ON CLUSTER`` (columns are checked on the node the client
    reaches). Returns the statements run.
    """
    run: list[str] = [database_ddl(database, cluster=cluster)]
    client.command(run[0])
    tables = table_count(cluster)
    for table in catalog.wide_tables:
        create = table_ddl(table, database, dedup_window, cluster=cluster)
        for statement in create[:tables]:
            client.command(statement)
            run.append(statement)
        for target, wanted in expected_columns(table, cluster=cluster).items():
            result = client.rows(_COLUMNS_QUERY, {"db": database, "t": target})
            present: dict[str, str] = {str(r[0]): str(r[1]) for r in result}
            for column, kind in wanted.items():
                if column not in present:
                    statement = add_column_statement(table, target, column, database, cluster=cluster)
                    client.command(statement)
                    run.append(statement)
                elif _normalize_type(present[column]) != _normalize_type(kind):
                    raise CatalogError(
                        f"{database}.{target}.{column} is {present[column]} but the catalog "
                        f"({table.file.name}) now makes it {kind}; migrate it deliberately (e.g. a new name)"
                    )
        for statement in create[tables:]:
            client.command(statement)
            run.append(statement)
    # the ledger the analyst views read is created here too: give an older one the columns it lacks
    ledger_columns = client.rows(SHAPE_COLUMNS_QUERY, {"db": database, "t": [LEDGER]})
    for shape, column in missing_shape_columns([LEDGER_SHAPE], ((r[0], r[1]) for r in ledger_columns)):
        statement = shape_add_column_ddl(shape, column, database, cluster=cluster)
        client.command(statement)
        run.append(statement)
    return run


def scratch_table_ddl(table: WideTable, name: str, *, cluster: str | None = None) -> str:
    """A run's own table with the partial table's columns and engine, in the client's database.

    On one server: ``AS T_partial``. On a cluster it is a plain table on the node the client reaches
    (never a copy of the Distributed table, whose inserts would land in the live partials, nor of
    the replicated one, whose Keeper path it would share)."""
    partial = table_names(table).partial
    if cluster is None:
        return f"CREATE TABLE IF NOT EXISTS {q(name)} AS {q(partial)}"
    return (
        f"CREATE TABLE IF NOT EXISTS {q(name)} AS {q(local_name(partial))}\n"
        "ENGINE = AggregatingMergeTree\n"
        "PARTITION BY toYYYYMMDD(`hour`)\n"
        f"ORDER BY ({q(table.key_name)}, `hour`)"
    )


_COLUMNS_QUERY = "SELECT name, type FROM system.columns WHERE database = {db:String} AND table = {t:String}"


def _normalize_type(text: str) -> str:
    return text.replace(" ", "").replace('"', "'")


def render_sql_file(
    table: WideTable, database: str, dedup_window: int = DEDUP_WINDOW, *, cluster: str | None = None
) -> str:
    """The content of ``sql/clickhouse/<table>.sql``: a header and the statements, each ending in ``;``."""
    objects = list(vars(table_names(table)).values())
    if cluster is not None:
        objects[:0] = [local_name(objects[0]), local_name(objects[2])]
    on = "" if cluster is None else f" on cluster {check_cluster(cluster)}"
    header = (
        f"-- Generated by `widehouse catalog ddl` from the catalog ({table.file.name}); do not edit.\n"
        f"-- Wide table {table.name}: one row per {table.key_name} per {table.grain}; "
        f"{len(table.columns)} stream columns, {len(table.offline_columns)} offline columns.\n"
        f"-- Objects{on}: {', '.join(objects)}.\n"
    )
    statements = table_ddl(table, database, dedup_window, cluster=cluster)
    return header + "\n" + "\n\n".join(s + ";" for s in statements) + "\n"

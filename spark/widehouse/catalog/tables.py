"""Wide-table files: grain, key, stream columns in order, offline (Hive) sources of daily tables."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from widehouse.catalog.model import (
    RESERVED_COLUMNS,
    RESERVED_PREFIX,
    OfflineColumn,
    OfflineSource,
    Topic,
    WideColumn,
    WideTable,
)
from widehouse.catalog.problems import FileProblems, line_of, text_value
from widehouse.catalog.types import SCALARS
from widehouse.catalog.yamlio import YList, YMap

_PLACEHOLDER = re.compile(r"\$\{([^}]*)\}")


@dataclass
class TableDraft:
    path: Path
    name: str
    name_line: int
    description: str
    grain: str
    key_name: str
    key_type: str
    columns: list[tuple[str, str, int]]
    offline: list[OfflineSource]


def parse_table(f: FileProblems, doc: Any, path: Path, sql_root: Path) -> TableDraft | None:  # noqa: PLR0912, PLR0915 - one flat list of checks reads best
    """A wide-table file, checked on its own (producers are checked by :func:`finish_table`)."""
    if doc is None:
        return None
    if not isinstance(doc, YMap):
        f.add(0, "", "expected a mapping with wide_table, grain, key, columns")
        return None
    complete = f.keys(doc, "", ("wide_table", "grain", "key", "columns"), ("description", "offline"))
    name = doc.get("wide_table")
    if "wide_table" in doc and not f.ident(name, doc.line_of("wide_table"), "wide_table", "wide table name"):
        return None
    if not complete:
        return None
    grain = doc["grain"]
    if grain not in ("hour", "day"):
        f.add(doc.line_of("grain"), "grain", f"{grain!r} must be hour or day")
    key = doc["key"]
    key_name, key_type = "key", "string"
    if not isinstance(key, YMap):
        f.add(doc.line_of("key"), "key", "expected a mapping {name: ..., type: long|string}")
    elif f.keys(key, "key", ("name", "type"), ("description",)):
        key_name, key_type = key["name"], key["type"]
        f.ident(key_name, key.line_of("name"), "key.name", "key name")
        if key_type not in ("long", "string"):
            f.add(key.line_of("type"), "key.type", f"{key_type!r} must be long or string")
        if key_name in RESERVED_COLUMNS:
            f.add(key.line_of("name"), "key.name", f"{key_name!r} is reserved for the period column")

    columns: list[tuple[str, str, int]] = []
    seen: dict[str, int] = {}
    raw_columns = doc["columns"]
    if not isinstance(raw_columns, YList) or not raw_columns:
        f.add(doc.line_of("columns"), "columns", "expected a non-empty list of column names")
        raw_columns = YList()
    for index, entry in enumerate(raw_columns):
        where = f"columns[{index}]"
        line = line_of(entry, default=raw_columns.line + index)
        description = ""
        if isinstance(entry, YMap):
            if not f.keys(entry, where, ("name",), ("description",)):
                continue
            column = entry["name"]
            description = text_value(f, entry, "description", "")
        else:
            column = entry
        if not f.ident(column, line, where, "column name"):
            continue
        if reserved(f, column, key_name, line, where):
            continue
        if column in seen:
            f.add(line, where, f"duplicate column {column!r} (first on line {seen[column]})")
            continue
        seen[column] = line
        columns.append((column, description, line))

    offline: list[OfflineSource] = []
    if "offline" in doc:
        if grain != "day":
            f.add(
                doc.line_of("offline"),
                "offline",
                "offline (Hive) columns belong to a day-grain table only",
            )
        else:
            offline = _parse_offline(
                f,
                doc["offline"],
                doc.line_of("offline"),
                key_name=key_name,
                stream_columns=seen,
                sql_root=sql_root,
            )
    return TableDraft(
        path=path,
        name=str(name),
        name_line=doc.line_of("wide_table"),
        description=text_value(f, doc, "description", ""),
        grain=grain if grain in ("hour", "day") else "hour",
        key_name=key_name,
        key_type=key_type,
        columns=columns,
        offline=offline,
    )


def reserved(f: FileProblems, column: str, key_name: str, line: int, where: str) -> bool:
    if column in RESERVED_COLUMNS or column.startswith(RESERVED_PREFIX) or column == key_name:
        f.add(
            line,
            where,
            f"column name {column!r} is reserved (the key, hour, day, finalized_at and the "
            f"{RESERVED_PREFIX} prefix belong to the pipeline)",
        )
        return True
    return False


def _parse_offline(  # noqa: PLR0912, PLR0915 - one flat list of checks reads best
    f: FileProblems,
    node: object,
    line: int,
    *,
    key_name: str,
    stream_columns: dict[str, int],
    sql_root: Path,
) -> list[OfflineSource]:
    if not isinstance(node, YList) or not node:
        f.add(line, "offline", "expected a list of sources {name, hive_tables, sql, columns}")
        return []
    sources: list[OfflineSource] = []
    seen: dict[str, str] = {}
    source_names: set[str] = set()
    for index, entry in enumerate(node):
        where = f"offline[{index}]"
        if not isinstance(entry, YMap):
            f.add(
                line_of(entry, default=node.line),
                where,
                "expected a mapping {name, hive_tables, sql, columns}",
            )
            continue
        if not f.keys(entry, where, ("name", "hive_tables", "sql", "columns"), ("description",)):
            continue
        name = entry["name"]
        if not f.ident(name, entry.line_of("name"), f"{where}.name", "source name"):
            continue
        if name in source_names:
            f.add(entry.line_of("name"), f"{where}.name", f"duplicate offline source {name!r}")
            continue
        source_names.add(name)
        hive_tables = entry["hive_tables"]
        tables: list[str] = []
        if not isinstance(hive_tables, YList) or not hive_tables:
            f.add(
                entry.line_of("hive_tables"),
                f"{where}.hive_tables",
                "expected a non-empty list of Hive table names",
            )
        else:
            for table in hive_tables:
                if f.ident(table, entry.line_of("hive_tables"), f"{where}.hive_tables", "Hive table name"):
                    tables.append(table)
        sql_path = _check_sql(
            f, entry["sql"], entry.line_of("sql"), where=f"{where}.sql", tables=tables, sql_root=sql_root
        )
        columns: list[OfflineColumn] = []
        raw = entry["columns"]
        if not isinstance(raw, YMap) or not raw:
            f.add(entry.line_of("columns"), f"{where}.columns", "expected a mapping column -> type")
            raw = YMap()
            raw.key_lines = {}
        for column, spec in raw.items():
            cwhere = f"{where}.columns.{column}"
            cline = raw.line_of(column)
            if not f.ident(column, cline, cwhere, "column name") or reserved(
                f, column, key_name, cline, cwhere
            ):
                continue
            description = ""
            type_name = spec
            if isinstance(spec, YMap):
                if not f.keys(spec, cwhere, ("type",), ("description",)):
                    continue
                type_name = spec["type"]
                description = text_value(f, spec, "description", "")
            if type_name not in SCALARS:
                f.add(cline, cwhere, f"type {type_name!r} must be one of {', '.join(SCALARS)}")
                continue
            if column in stream_columns:
                f.add(cline, cwhere, f"{column!r} is also a stream column (line {stream_columns[column]})")
                continue
            if column in seen:
                f.add(cline, cwhere, f"{column!r} is already filled by offline source {seen[column]!r}")
                continue
            seen[column] = name
            columns.append(OfflineColumn(column, type_name, name, description))
        if sql_path is not None:
            sources.append(OfflineSource(name, tuple(tables), str(entry["sql"]), sql_path, tuple(columns)))
    return sources


def _check_sql(
    f: FileProblems, value: object, line: int, *, where: str, tables: list[str], sql_root: Path
) -> Path | None:
    if (
        not isinstance(value, str)
        or not value.endswith(".sql")
        or value.startswith("/")
        or ".." in value.split("/")
    ):
        f.add(line, where, f"{value!r} must be a relative path of a .sql file under the sql directory")
        return None
    path = sql_root / value
    if not path.is_file():
        f.add(line, where, f"SQL file {path} does not exist")
        return None
    text = path.read_text(encoding="utf-8")
    placeholders = set(_PLACEHOLDER.findall(text))
    if placeholders - {"db"}:
        f.add(
            line,
            where,
            f"{value} uses unknown placeholders {sorted(placeholders - {'db'})}; only ${{db}} is substituted",
        )
    if not re.search(r":day\b", text):
        f.add(line, where, f"{value} must select one day with the :day parameter")
    for table in tables:
        if not re.search(rf"\$\{{db\}}\.{table}\b", text):
            f.add(line, where, f"{value} does not read ${{db}}.{table}, listed in hive_tables")
    return path


def finish_table(
    f: FileProblems,
    draft: TableDraft,
    topics: dict[str, Topic],
    check_producers: bool,
    display: Callable[[Path], str],
) -> WideTable:
    """The wide table with column types derived from its producers (every column needs one, and
    producers of one column must agree on aggregate and type)."""
    columns: list[WideColumn] = []
    for column, description, line in draft.columns:
        producers = [
            (topic, mapping)
            for topic in topics.values()
            for mapping in topic.mappings
            if mapping.table == draft.name and mapping.column == column
        ]
        if not producers:
            if not check_producers:
                continue
            f.add(
                line,
                f"columns.{column}",
                f"column {column!r} has no producer: no topic maps to it (add it under "
                f"'columns: {{{draft.name}: ...}}' in a topic file, or remove it)",
            )
            continue
        kinds = {(m.agg, m.value_type) for _, m in producers}
        if len(kinds) > 1:
            detail = "; ".join(
                f"{display(t.file)} maps {m.agg}({m.field_name or ''}) -> {m.value_type}"
                for t, m in producers
            )
            f.add(
                line,
                f"columns.{column}",
                f"producers disagree on the aggregate or type of {column!r}: {detail}",
            )
            continue
        agg, value_type = next(iter(kinds))
        columns.append(WideColumn(column, agg, value_type, description))
    return WideTable(
        name=draft.name,
        file=draft.path,
        description=draft.description,
        grain=draft.grain,
        key_name=draft.key_name,
        key_type=draft.key_type,
        columns=tuple(columns),
        offline=tuple(draft.offline),
    )


# -- topics --------------------------------------------------------------------------------

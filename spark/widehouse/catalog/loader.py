"""Load and validate the catalog directory (``schemas/``).

Layout::

    schemas/catalog.yaml                               # optional: name, payload limit, event-time rules
    schemas/tables/<wide_table>.yaml                   # one file per wide table
    schemas/topics/<tenant>/<namespace>/<topic>.yaml   # one file per topic (any layout under topics/)

Every problem found is collected and reported together in one :class:`CatalogValidationError` (a
:class:`~widehouse.errors.CatalogError`), each line naming the file, line, field and what is wrong.
Wide-table files are read first (:mod:`~widehouse.catalog.tables`), then topics (fields in
:mod:`~widehouse.catalog.fields`, column mappings here), then every column is checked for producers.
The file format is documented in ``schemas/README.md``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from widehouse.catalog.eventtime import DEFAULT_RULES, EventTimeRules, parse_duration_ms
from widehouse.catalog.fields import parse_fields
from widehouse.catalog.filters import Filter, FilterError, parse_filter
from widehouse.catalog.model import (
    AGGREGATES,
    DEFAULT_MAX_PAYLOAD_BYTES,
    Catalog,
    ColumnMapping,
    Topic,
    Traffic,
)
from widehouse.catalog.problems import (
    CatalogValidationError,
    FileProblems,
    Problem,
    Problems,
    is_int,
    is_number,
    text_value,
)
from widehouse.catalog.tables import TableDraft, finish_table, parse_table
from widehouse.catalog.types import NUMERIC, ORDERED, Field
from widehouse.catalog.yamlio import YMap, load_yaml
from widehouse.errors import CatalogError, PulsarError
from widehouse.pulsar.topics import TopicName

# Aggregates people reach for that cannot merge partial results exactly, and what to do instead.
NOT_MERGEABLE = {
    "avg": "an average of averages is wrong; map a sum column and a count column and divide in a view",
    "mean": "an average of averages is wrong; map a sum column and a count column and divide in a view",
    "count_distinct": "exact distinct counts cannot be merged from partial counts",
    "distinct_count": "exact distinct counts cannot be merged from partial counts",
    "uniq": "exact distinct counts cannot be merged from partial counts",
    "approx_count_distinct": "sketches are not supported as wide-table columns",
    "median": "quantiles cannot be merged from partial results",
    "percentile": "quantiles cannot be merged from partial results",
    "quantile": "quantiles cannot be merged from partial results",
    "stddev": "deviations cannot be merged from partial results; map sum, sum of squares and count",
    "variance": "variances cannot be merged from partial results; map sum, sum of squares and count",
    "mode": "the most frequent value cannot be merged from partial results",
    "collect_list": "lists are not wide-table values",
    "collect_set": "sets are not wide-table values",
    "any": "'any' is not deterministic; use first or last (by event time)",
}
_SHORT_AGG = re.compile(r"^\s*([A-Za-z_]+)\s*(?:\(\s*([A-Za-z0-9_.]*)\s*\))?\s*$")
MAX_PARTITIONS = 1024
PAYLOAD_LIMITS = (256, 5 * 1024 * 1024)  # Pulsar's default maxMessageSize is 5 MiB


# =============================================================================================
def load_catalog(schemas_dir: Path, sql_dir: Path | None = None) -> Catalog:
    """Load and validate the catalog at ``schemas_dir``.

    ``sql_dir`` holds the Hive SQL of offline columns (default: ``schemas_dir``'s sibling ``sql/``).
    Raises :class:`CatalogValidationError` listing every problem found.
    """
    root = Path(schemas_dir)
    sql_root = Path(sql_dir) if sql_dir is not None else root.parent / "sql"
    if not root.is_dir():
        raise CatalogError(f"catalog directory {root} does not exist (set WIDEHOUSE_SCHEMAS_DIR)")
    problems = Problems()
    loader = _Loader(root, sql_root, problems)
    catalog = loader.load()
    if problems.items or catalog is None:
        raise CatalogValidationError(
            root, problems.items or [Problem(str(root), 0, "", "catalog is invalid")]
        )
    return catalog


class _Loader:
    def __init__(self, root: Path, sql_root: Path, problems: Problems) -> None:
        self.root = root
        self.sql_root = sql_root
        self.problems = problems

    def display(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.root.parent))
        except ValueError:
            return str(path)

    def file(self, path: Path) -> FileProblems:
        return FileProblems(self.problems, path, self.display(path))

    def read(self, path: Path) -> Any:
        try:
            return load_yaml(path, self.display(path))
        except CatalogError as exc:
            self.problems.add(self.display(path), 0, "", str(exc).split(": ", 1)[-1])
            return None

    # -------------------------------------------------------------------------------------
    def load(self) -> Catalog | None:
        settings = self.load_settings()
        for path in sorted(self.root.iterdir()):
            if path.is_file() and path.suffix in {".yaml", ".yml"} and path.stem != "catalog":
                self.problems.add(
                    self.display(path),
                    0,
                    "",
                    "unexpected file: topic files go under topics/, wide tables under tables/",
                )
        table_files = _yaml_files(self.root / "tables")
        topic_files = _yaml_files(self.root / "topics")
        if not table_files:
            self.problems.add(
                self.display(self.root / "tables"), 0, "", "no wide-table files (tables/*.yaml)"
            )
        if not topic_files:
            self.problems.add(self.display(self.root / "topics"), 0, "", "no topic files (topics/**/*.yaml)")

        tables: dict[str, TableDraft] = {}
        for path in table_files:
            draft = parse_table(self.file(path), self.read(path), path, self.sql_root)
            if draft is None:
                continue
            if draft.name in tables:
                other = tables[draft.name]
                self.problems.add(
                    self.display(path),
                    draft.name_line,
                    "wide_table",
                    f"duplicate wide table {draft.name!r}: also defined in {self.display(other.path)}",
                )
                continue
            tables[draft.name] = draft

        topics: dict[str, Topic] = {}
        before = len(self.problems.items)
        for path in topic_files:
            topic = self.load_topic(path, tables, settings.max_payload_bytes)
            if topic is None:
                continue
            name = str(topic.name)
            if name in topics:
                self.problems.add(
                    self.display(path),
                    0,
                    "topic",
                    f"duplicate topic {name}: also defined in {self.display(topics[name].file)}",
                )
                continue
            topics[name] = topic

        # A broken topic file or mapping may hold the producers of some columns: then missing
        # producers are not reported (they would only repeat the real problem).
        broken = len(self.problems.items) > before
        wide_tables = [
            finish_table(self.file(draft.path), draft, topics, not broken, self.display)
            for draft in tables.values()
        ]
        if self.problems.items:
            return None
        return Catalog(
            root=self.root,
            sql_dir=self.sql_root,
            name=settings.name,
            description=settings.description,
            rules=settings.rules,
            max_payload_bytes=settings.max_payload_bytes,
            topics=tuple(sorted(topics.values(), key=lambda t: str(t.name))),
            wide_tables=tuple(sorted(wide_tables, key=lambda t: t.name)),
        )

    # -- catalog.yaml --------------------------------------------------------------------------
    def load_settings(self) -> _Settings:  # noqa: PLR0912 - one flat list of checks reads best
        path = self.root / "catalog.yaml"
        defaults = _Settings("widehouse", "", DEFAULT_RULES, DEFAULT_MAX_PAYLOAD_BYTES)
        if not path.is_file():
            return defaults
        doc = self.read(path)
        f = self.file(path)
        if doc is None:
            return defaults
        if not isinstance(doc, YMap):
            f.add(0, "", "expected a mapping with name, description, limits, event_time")
            return defaults
        f.keys(doc, "", (), ("name", "description", "limits", "event_time"))
        name = doc.get("name", "widehouse")
        if not isinstance(name, str) or not name.strip():
            f.add(doc.line_of("name"), "name", "must be a non-empty string")
            name = "widehouse"
        description = text_value(f, doc, "description", "")
        max_payload = DEFAULT_MAX_PAYLOAD_BYTES
        limits = doc.get("limits")
        if limits is not None:
            if not isinstance(limits, YMap):
                f.add(doc.line_of("limits"), "limits", "expected a mapping with max_payload_bytes")
            else:
                f.keys(limits, "limits", (), ("max_payload_bytes",))
                if "max_payload_bytes" in limits:
                    value = limits["max_payload_bytes"]
                    low, high = PAYLOAD_LIMITS
                    if not is_int(value) or not low <= value <= high:
                        f.add(
                            limits.line_of("max_payload_bytes"),
                            "limits.max_payload_bytes",
                            f"{value!r} must be an integer between {low} and {high} "
                            "(Pulsar's default maximum)",
                        )
                    else:
                        max_payload = value
        rules = DEFAULT_RULES
        section = doc.get("event_time")
        if section is not None:
            if not isinstance(section, YMap):
                f.add(
                    doc.line_of("event_time"),
                    "event_time",
                    "expected a mapping with lateness, max_future, max_age",
                )
            else:
                f.keys(section, "event_time", (), ("lateness", "max_future", "max_age"))
                values = {
                    "lateness": DEFAULT_RULES.lateness_ms,
                    "max_future": DEFAULT_RULES.max_future_ms,
                    "max_age": DEFAULT_RULES.max_age_ms,
                }
                for key in values:
                    if key in section:
                        try:
                            values[key] = parse_duration_ms(section[key])
                        except ValueError as exc:
                            f.add(section.line_of(key), f"event_time.{key}", str(exc))
                try:
                    rules = EventTimeRules(values["lateness"], values["max_future"], values["max_age"])
                except ValueError as exc:
                    f.add(section.line, "event_time", str(exc))
        return _Settings(name.strip(), description, rules, max_payload)

    # -- wide tables ---------------------------------------------------------------------------
    def load_topic(self, path: Path, tables: dict[str, TableDraft], max_payload: int) -> Topic | None:
        doc = self.read(path)
        f = self.file(path)
        if doc is None:
            return None
        if not isinstance(doc, YMap):
            f.add(0, "", "expected a mapping with topic, key, event_time, fields, columns")
            return None
        complete = f.keys(
            doc, "", ("topic", "key", "event_time", "fields"), ("description", "traffic", "columns")
        )
        name = self.topic_name(f, doc)
        if name is None or not complete:
            return None
        fields = parse_fields(f, doc["fields"], doc.line_of("fields"), "fields", depth=0)
        if fields is None:
            return None
        by_name = {fld.name: fld for fld in fields}
        key, event_time = doc["key"], doc["event_time"]
        key_field = by_name.get(key) if isinstance(key, str) else None
        ok = True
        if key_field is None:
            f.add(doc.line_of("key"), "key", f"key field {key!r} is not a top-level field of this topic")
            ok = False
        elif key_field.type.kind not in ("long", "string"):
            f.add(
                doc.line_of("key"),
                "key",
                f"key field {key!r} is {key_field.type.describe()}; it must be long or string",
            )
            ok = False
        elif key_field.gen.null_rate:
            f.add(doc.line_of("key"), "key", f"key field {key!r} cannot have a null_rate")
        time_field = by_name.get(event_time) if isinstance(event_time, str) else None
        if time_field is None:
            f.add(
                doc.line_of("event_time"),
                "event_time",
                f"event-time field {event_time!r} is not a top-level field of this topic",
            )
            ok = False
        elif time_field.type.kind != "timestamp-ms":
            f.add(
                doc.line_of("event_time"),
                "event_time",
                f"event-time field {event_time!r} is {time_field.type.describe()}; it must be timestamp-ms",
            )
            ok = False
        elif time_field.gen.null_rate:
            f.add(
                doc.line_of("event_time"),
                "event_time",
                f"event-time field {event_time!r} cannot have a null_rate",
            )
        if key == event_time and isinstance(key, str):
            f.add(
                doc.line_of("event_time"), "event_time", "the key and the event time must be different fields"
            )
            ok = False
        traffic = self.traffic(f, doc)
        draft = Topic(
            name=name,
            origin=str(name),
            file=path,
            description=text_value(f, doc, "description", ""),
            key=key if isinstance(key, str) else "",
            event_time=event_time if isinstance(event_time, str) else "",
            fields=fields,
            traffic=traffic,
            mappings=(),
        )
        mappings = self.mappings(f, doc, draft, tables) if ok else []
        if not ok:
            return None
        return Topic(
            name=draft.name,
            origin=draft.origin,
            file=draft.file,
            description=draft.description,
            key=draft.key,
            event_time=draft.event_time,
            fields=draft.fields,
            traffic=draft.traffic,
            mappings=tuple(mappings),
        )

    def topic_name(self, f: FileProblems, doc: YMap) -> TopicName | None:
        raw = doc.get("topic")
        if not isinstance(raw, str):
            f.add(
                doc.line_of("topic"),
                "topic",
                "expected a full topic name persistent://tenant/namespace/topic",
            )
            return None
        try:
            name = TopicName.parse(raw)
        except PulsarError as exc:
            f.add(doc.line_of("topic"), "topic", str(exc))
            return None
        if name.domain != "persistent":
            f.add(
                doc.line_of("topic"),
                "topic",
                f"{raw} must be persistent:// (the pipeline needs retention and cursors)",
            )
            return None
        if name.partition_index is not None:
            f.add(doc.line_of("topic"), "topic", f"{raw} names a partition; use the partitioned topic's name")
            return None
        return name

    def traffic(self, f: FileProblems, doc: YMap) -> Traffic:
        node = doc.get("traffic")
        if node is None:
            return Traffic()
        if not isinstance(node, YMap):
            f.add(doc.line_of("traffic"), "traffic", "expected a mapping {weight, partitions}")
            return Traffic()
        f.keys(node, "traffic", (), ("weight", "partitions"))
        weight, partitions = node.get("weight", 1.0), node.get("partitions", 1)
        if not is_number(weight) or not 0 < weight < 1e9:
            f.add(node.line_of("weight"), "traffic.weight", f"{weight!r} must be a positive number")
            weight = 1.0
        if not is_int(partitions) or not 1 <= partitions <= MAX_PARTITIONS:
            f.add(
                node.line_of("partitions"),
                "traffic.partitions",
                f"{partitions!r} must be an integer 1..{MAX_PARTITIONS}",
            )
            partitions = 1
        return Traffic(float(weight), int(partitions))

    def mappings(
        self, f: FileProblems, doc: YMap, topic: Topic, tables: dict[str, TableDraft]
    ) -> list[ColumnMapping]:
        node = doc.get("columns")
        if node is None:
            return []
        if not isinstance(node, YMap):
            f.add(doc.line_of("columns"), "columns", "expected a mapping wide_table -> {column: aggregate}")
            return []
        result: list[ColumnMapping] = []
        for table_name, columns in node.items():
            twhere = f"columns.{table_name}"
            tline = node.line_of(table_name)
            table = tables.get(table_name)
            if table is None:
                known = ", ".join(sorted(tables)) or "none"
                f.add(tline, twhere, f"unknown wide table {table_name!r} (known: {known})")
                continue
            key_type = topic.field(topic.key).type.kind
            if key_type != table.key_type:
                f.add(
                    tline,
                    twhere,
                    f"key field {topic.key!r} is {key_type} but {table_name}'s key "
                    f"{table.key_name!r} is {table.key_type}",
                )
                continue
            if not isinstance(columns, YMap) or not columns:
                f.add(tline, twhere, "expected a mapping column -> aggregate")
                continue
            declared = {name for name, _, _ in table.columns}
            for column, spec in columns.items():
                cwhere = f"{twhere}.{column}"
                cline = columns.line_of(column)
                if not f.ident(column, cline, cwhere, "column name"):
                    continue
                if column not in declared:
                    f.add(
                        cline,
                        cwhere,
                        f"{table_name} has no column {column!r}; "
                        f"declare it in {self.display(table.path)} first",
                    )
                    continue
                mapping = self.mapping(f, topic, table_name, column, spec, line=cline, where=cwhere)
                if mapping is not None:
                    result.append(mapping)
        return result

    def mapping(  # noqa: PLR0911, PLR0912 - one check after another
        self,
        f: FileProblems,
        topic: Topic,
        table: str,
        column: str,
        spec: object,
        *,
        line: int,
        where: str,
    ) -> ColumnMapping | None:
        filter_text: object = None
        if isinstance(spec, str):
            match = _SHORT_AGG.match(spec)
            if not match:
                f.add(line, where, f"{spec!r} is not an aggregate such as count, sum(field) or last(field)")
                return None
            agg, path_text = match.group(1), match.group(2)
            if path_text == "":
                path_text = None
        elif isinstance(spec, YMap):
            if not f.keys(spec, where, ("agg",), ("field", "filter", "description")):
                return None
            agg, path_text, filter_text = spec["agg"], spec.get("field"), spec.get("filter")
            line = spec.line
        else:
            f.add(line, where, "expected an aggregate (count, sum(field)) or a mapping {agg, field, filter}")
            return None
        if not isinstance(agg, str) or agg.lower() not in AGGREGATES:
            hint = NOT_MERGEABLE.get(str(agg).lower())
            if hint:
                f.add(line, where, f"aggregate {agg!r} cannot merge across micro-batches: {hint}")
            else:
                f.add(line, where, f"unknown aggregate {agg!r}; use one of {', '.join(AGGREGATES)}")
            return None
        agg = agg.lower()
        source_type: str | None = None
        path: tuple[str, ...] | None = None
        if agg == "count":
            if path_text is not None:
                f.add(
                    line,
                    where,
                    "count takes no field; to count events that have a value use "
                    f"filter: '{path_text} is not null'",
                )
                return None
            value_type = "long"
        else:
            if not isinstance(path_text, str) or not path_text:
                f.add(line, where, f"{agg} needs a source field, e.g. {agg}(amount)")
                return None
            path = tuple(path_text.split("."))
            try:
                source_type = self.scalar_at(topic, path)
            except FilterError as exc:
                f.add(line, where, f"source field: {exc}")
                return None
            if agg == "sum" and source_type not in NUMERIC:
                f.add(line, where, f"sum needs a numeric field; {path_text!r} is {source_type}")
                return None
            if agg in ("min", "max") and source_type not in ORDERED:
                f.add(
                    line,
                    where,
                    f"{agg} needs an ordered field; {path_text!r} is {source_type} (use first/last)",
                )
                return None
            value_type = ("double" if source_type == "double" else "long") if agg == "sum" else source_type
        parsed_filter: Filter | None = None
        if filter_text is not None:
            try:
                parsed_filter = parse_filter(filter_text, lambda p: self.scalar_at(topic, p))  # type: ignore[arg-type]
            except FilterError as exc:
                f.add(line, f"{where}.filter", f"{exc} (in filter {filter_text!r})")
                return None
        return ColumnMapping(table, column, agg, path, parsed_filter, source_type, value_type)

    @staticmethod
    def scalar_at(topic: Topic, path: tuple[str, ...]) -> str:
        fields = topic.fields
        where: list[str] = []
        found: Field | None = None
        for part in path:
            where.append(part)
            if found is not None and found.type.kind != "object":
                raise FilterError(
                    f"{'.'.join(where[:-1])!r} is {found.type.describe()}; only objects have sub-fields"
                )
            found = next((fld for fld in fields if fld.name == part), None)
            if found is None:
                raise FilterError(f"no field {'.'.join(where)!r} in topic {topic.name}")
            fields = found.type.fields
        if found is None:
            raise FilterError("empty field path")
        if not found.type.is_scalar:
            raise FilterError(f"{'.'.join(path)!r} is {found.type.describe()}, not a scalar")
        return found.type.kind


@dataclass(frozen=True)
class _Settings:
    name: str
    description: str
    rules: EventTimeRules
    max_payload_bytes: int


def _yaml_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.rglob("*") if p.is_file() and p.suffix in {".yaml", ".yml"})

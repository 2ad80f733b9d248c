"""The catalog's objects: topics, their column mappings, wide tables and the catalog itself.

All frozen; built only by :func:`widehouse.catalog.loader.load_catalog`, which validates everything
first. Every name here is a validated identifier (``^[a-z][a-z0-9_]{0,62}$``), safe to put in SQL.

Aggregates merge across micro-batches: ``count`` and ``sum`` by sum, ``min`` / ``max`` by min / max,
``first`` / ``last`` as (event time, value) pairs merged by min / max of the pair, so ties on the
event time go to the smaller (first) or larger (last) value in every engine.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from widehouse.catalog.eventtime import EventTimeRules
from widehouse.catalog.filters import Filter
from widehouse.catalog.filters import Path as FieldPath
from widehouse.catalog.types import Field, FieldType
from widehouse.errors import CatalogError
from widehouse.pulsar.topics import TopicName

AGGREGATES: tuple[str, ...] = ("count", "sum", "min", "max", "first", "last")
PAIR_AGGREGATES = frozenset({"first", "last"})
# How partial values merge: the function applied to partials of one (key, period).
MERGE_FUNCTION = {"count": "sum", "sum": "sum", "min": "min", "max": "max", "first": "min", "last": "max"}
# Column names a wide table may not use: its period columns, the finalize version, and the wh_ prefix
# (kept for pipeline metadata columns such as a batch id).
RESERVED_COLUMNS = frozenset({"hour", "day", "finalized_at"})
RESERVED_PREFIX = "wh_"
DEFAULT_MAX_PAYLOAD_BYTES = 64 * 1024


@dataclass(frozen=True)
class Traffic:
    """Traffic hints: relative weight (the generator's default mix) and default partition count."""

    weight: float = 1.0
    partitions: int = 1


@dataclass(frozen=True)
class ColumnMapping:
    """One topic feeding one wide-table column."""

    table: str
    column: str
    agg: str
    field: FieldPath | None
    """Dotted path of the source field (None for count)."""
    filter: Filter | None
    source_type: str | None
    """Scalar type of the source field (None for count)."""
    value_type: str
    """Type of the column's final value: long for count, long/double for sum, else the source type."""

    @property
    def field_name(self) -> str | None:
        return ".".join(self.field) if self.field else None


@dataclass(frozen=True)
class Topic:
    """A Pulsar topic with its payload schema and the wide-table columns it fills."""

    name: TopicName
    origin: str
    """The name as written in the catalog (relocated catalogs keep it; generator seeds use it)."""
    file: Path
    description: str
    key: str
    event_time: str
    fields: tuple[Field, ...]
    traffic: Traffic
    mappings: tuple[ColumnMapping, ...]

    @property
    def key_type(self) -> str:
        return self.field(self.key).type.kind

    @property
    def tables(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(m.table for m in self.mappings))

    def field(self, path: str | FieldPath) -> Field:
        """The field at a (dotted) path; KeyError naming the path if there is none."""
        parts = tuple(path.split(".")) if isinstance(path, str) else path
        fields = self.fields
        found: Field | None = None
        for part in parts:
            found = next((f for f in fields if f.name == part), None)
            if found is None:
                raise KeyError(f"{self.name}: no field {'.'.join(parts)!r}")
            fields = found.type.fields
        if found is None:
            raise KeyError(f"{self.name}: empty field path")
        return found

    def mappings_for(self, table: str) -> tuple[ColumnMapping, ...]:
        return tuple(m for m in self.mappings if m.table == table)

    @property
    def payload_type(self) -> FieldType:
        """The whole payload as an object type (what ``from_json`` parses)."""
        return FieldType("object", fields=self.fields)

    def spark_ddl(self) -> str:
        """Spark DDL of the payload schema, e.g. ``\\`uid\\` bigint, \\`ts\\` bigint, ...``."""
        return ", ".join(f"`{f.name}` {f.type.spark_ddl()}" for f in self.fields)


@dataclass(frozen=True)
class WideColumn:
    """A stream column of a wide table: its aggregate and value type, derived from its producers."""

    name: str
    agg: str
    value_type: str
    description: str = ""

    @property
    def merge_function(self) -> str:
        return MERGE_FUNCTION[self.agg]

    @property
    def is_pair(self) -> bool:
        """first/last: the partial is an (event time, value) pair."""
        return self.agg in PAIR_AGGREGATES


@dataclass(frozen=True)
class OfflineColumn:
    """A daily column filled from offline (Hive) data by one source's SQL."""

    name: str
    type: str
    source: str
    description: str = ""


@dataclass(frozen=True)
class OfflineSource:
    """A Hive aggregation: the SQL file (relative to sql/) and the columns its result provides."""

    name: str
    hive_tables: tuple[str, ...]
    sql: str
    sql_path: Path
    columns: tuple[OfflineColumn, ...]


@dataclass(frozen=True)
class WideTable:
    """One row per key per hour or day; stream columns in order, then offline columns (daily only)."""

    name: str
    file: Path
    description: str
    grain: str
    key_name: str
    key_type: str
    columns: tuple[WideColumn, ...]
    offline: tuple[OfflineSource, ...] = ()
    _by_name: dict[str, WideColumn] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", {c.name: c for c in self.columns})

    @property
    def period(self) -> str:
        """The period column: ``hour`` or ``day``."""
        return self.grain

    @property
    def offline_columns(self) -> tuple[OfflineColumn, ...]:
        return tuple(c for source in self.offline for c in source.columns)

    def column(self, name: str) -> WideColumn:
        try:
            return self._by_name[name]
        except KeyError:
            raise CatalogError(f"wide table {self.name!r} has no stream column {name!r}") from None

    def has_column(self, name: str) -> bool:
        return name in self._by_name


@dataclass(frozen=True)
class Catalog:
    """The whole validated catalog. Topics are sorted by name, wide tables by file order of names."""

    root: Path
    sql_dir: Path
    name: str
    description: str
    rules: EventTimeRules
    max_payload_bytes: int
    topics: tuple[Topic, ...]
    wide_tables: tuple[WideTable, ...]
    _topics: dict[str, Topic] = field(init=False, repr=False, compare=False)
    _tables: dict[str, WideTable] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_topics", {str(t.name): t for t in self.topics})
        object.__setattr__(self, "_tables", {t.name: t for t in self.wide_tables})

    # -- lookups -----------------------------------------------------------------------------
    def topic(self, name: str | TopicName) -> Topic:
        try:
            return self._topics[str(name)]
        except KeyError:
            raise CatalogError(f"topic {str(name)!r} is not in the catalog at {self.root}") from None

    def has_topic(self, name: str | TopicName) -> bool:
        return str(name) in self._topics

    def table(self, name: str) -> WideTable:
        try:
            return self._tables[name]
        except KeyError:
            known = ", ".join(sorted(self._tables)) or "none"
            raise CatalogError(f"wide table {name!r} is not in the catalog (known: {known})") from None

    def topics_for(self, table: str) -> tuple[Topic, ...]:
        """Topics that fill at least one column of ``table``."""
        return tuple(t for t in self.topics if table in t.tables)

    def producers(self, table: str, column: str) -> tuple[tuple[Topic, ColumnMapping], ...]:
        """Every (topic, mapping) that fills ``table.column``."""
        return tuple(
            (t, m) for t in self.topics for m in t.mappings if m.table == table and m.column == column
        )

    def __iter__(self) -> Iterator[Topic]:
        return iter(self.topics)

    # -- derived catalogs ---------------------------------------------------------------------
    def relocated(self, tenant_suffix: str) -> Catalog:
        """The same catalog with every topic moved to tenant ``<tenant>-<suffix>``.

        Tests and demos publish to unique tenants this way without editing the catalog; topics keep
        their ``origin`` name, so generated events stay the same.
        """
        topics = []
        for topic in self.topics:
            name = TopicName(
                topic.name.domain,
                f"{topic.name.tenant}-{tenant_suffix}",
                topic.name.namespace,
                topic.name.local,
            )
            topics.append(replace(topic, name=TopicName.parse(str(name))))
        return replace(self, topics=tuple(sorted(topics, key=lambda t: str(t.name))))

    # -- identity -----------------------------------------------------------------------------
    @property
    def fingerprint(self) -> str:
        """A short stable hash of everything that shapes data (names, types, mappings, limits)."""
        digest = hashlib.sha256(json.dumps(self.describe(), sort_keys=True).encode()).hexdigest()
        return digest[:16]

    def describe(self) -> dict[str, Any]:
        """A plain, JSON-able description of the catalog (stable order)."""

        def field_desc(f: Field) -> dict[str, Any]:
            return {
                "name": f.name,
                "type": f.type.describe(),
                "fields": [field_desc(c) for c in f.type.fields],
            }

        return {
            "rules": [self.rules.lateness_ms, self.rules.max_future_ms, self.rules.max_age_ms],
            "max_payload_bytes": self.max_payload_bytes,
            "topics": [
                {
                    "name": str(t.name),
                    "key": t.key,
                    "event_time": t.event_time,
                    "fields": [field_desc(f) for f in t.fields],
                    "mappings": [
                        [m.table, m.column, m.agg, m.field_name, m.filter.text if m.filter else None]
                        for m in t.mappings
                    ],
                }
                for t in self.topics
            ],
            "tables": [
                {
                    "name": w.name,
                    "grain": w.grain,
                    "key": [w.key_name, w.key_type],
                    "columns": [[c.name, c.agg, c.value_type] for c in w.columns],
                    "offline": [[s.name, s.sql, [[c.name, c.type] for c in s.columns]] for s in w.offline],
                }
                for w in self.wide_tables
            ],
        }

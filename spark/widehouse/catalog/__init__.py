"""The catalog: topics (payload schemas, key, event time, column mappings) and wide tables.

``load_catalog(schemas_dir)`` reads and validates ``schemas/`` into frozen objects; everything else
(Spark schemas, ClickHouse DDL, Delta schemas, HBase columns, the generator, the reference parser)
is derived from it. This package is light: no pyspark (see :mod:`widehouse.catalog.spark`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from widehouse.catalog.eventtime import (
    DEFAULT_RULES,
    EventTimeRules,
    classify_event_time,
    day_start,
    hour_start,
)
from widehouse.catalog.filters import Filter, FilterError, parse_filter
from widehouse.catalog.model import (
    AGGREGATES,
    Catalog,
    ColumnMapping,
    OfflineColumn,
    OfflineSource,
    Topic,
    Traffic,
    WideColumn,
    WideTable,
)
from widehouse.catalog.semantics.parse import (
    OVERFLOW,
    QUARANTINE_REASONS,
    REJECTION_REASONS,
    Accepted,
    Rejected,
    parse_event,
)
from widehouse.catalog.types import Field, FieldType
from widehouse.lazy import lazy_attribute

if TYPE_CHECKING:
    from widehouse.catalog.loader import load_catalog
    from widehouse.catalog.problems import CatalogValidationError, Problem

__all__ = [
    "AGGREGATES",
    "DEFAULT_RULES",
    "OVERFLOW",
    "QUARANTINE_REASONS",
    "REJECTION_REASONS",
    "Accepted",
    "Catalog",
    "CatalogValidationError",
    "ColumnMapping",
    "EventTimeRules",
    "Field",
    "FieldType",
    "Filter",
    "FilterError",
    "OfflineColumn",
    "OfflineSource",
    "Problem",
    "Rejected",
    "Topic",
    "Traffic",
    "WideColumn",
    "WideTable",
    "classify_event_time",
    "day_start",
    "hour_start",
    "load_catalog",
    "parse_event",
    "parse_filter",
]


_LAZY = {
    "load_catalog": "widehouse.catalog.loader",
    "CatalogValidationError": "widehouse.catalog.problems",
    "Problem": "widehouse.catalog.problems",
}


def __getattr__(name: str) -> Any:
    """The loader and its problem types, imported on first use: they bring YAML with them, which
    the processes Spark starts for the stream's source (a plan, already parsed) never need."""
    return lazy_attribute(globals(), _LAZY, name)

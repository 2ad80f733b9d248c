"""Compare the catalog's topic schemas with Pulsar's schema registry (``catalog check --against-pulsar``).

Every difference is listed, per topic and dotted field path:

- ``missing topic schema``: the registry has no schema for a catalog topic;
- ``schema type``: the registered schema is not ``JSON`` (catalog payloads are JSON objects);
- ``missing field``: a catalog field the registered schema does not have;
- ``extra field``: a registered field the catalog does not declare;
- ``type mismatch``: both have the field with different types.

Types compare in the catalog's spelling; a catalog ``timestamp-ms`` (epoch milliseconds) matches a
registered ``long`` with or without the ``timestamp-millis`` logical type, and nullability is not
compared (the catalog has none: missing values are nulls).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from widehouse.catalog.model import Catalog
from widehouse.catalog.types import Field, FieldType
from widehouse.errors import PulsarError
from widehouse.pulsar.admin import PulsarAdmin
from widehouse.pulsar.schemas import SchemaField, registered_schema

MISSING_SCHEMA = "missing topic schema"
SCHEMA_TYPE = "schema type"
MISSING_FIELD = "missing field"
EXTRA_FIELD = "extra field"
TYPE_MISMATCH = "type mismatch"


@dataclass(frozen=True, order=True)
class SchemaDifference:
    topic: str
    kind: str
    field: str = ""
    catalog: str = ""
    registry: str = ""


def check_against_registry(catalog: Catalog, admin: PulsarAdmin) -> list[SchemaDifference]:
    """Every difference between the catalog's topics and their registered schemas, sorted."""
    differences: list[SchemaDifference] = []
    for topic in catalog.topics:
        name = str(topic.name)
        schema = registered_schema(admin, topic.name)
        if schema is None:
            differences.append(SchemaDifference(name, MISSING_SCHEMA, catalog="json", registry="none"))
            continue
        if schema.type != "JSON":
            differences.append(SchemaDifference(name, SCHEMA_TYPE, catalog="JSON", registry=schema.type))
        try:
            fields = schema.fields()
        except PulsarError as exc:
            differences.append(SchemaDifference(name, SCHEMA_TYPE, catalog="JSON", registry=str(exc)))
            continue
        differences.extend(compare_fields(name, topic.fields, fields))
    return sorted(differences)


def compare_fields(
    topic: str, declared: Iterable[Field], registered: Iterable[SchemaField], prefix: str = ""
) -> list[SchemaDifference]:
    """Differences between catalog fields and registered fields (recursing into objects)."""
    ours = {f.name: f for f in declared}
    theirs = {f.name: f for f in registered}
    out: list[SchemaDifference] = []
    for name, field in ours.items():
        path = prefix + name
        other = theirs.get(name)
        if other is None:
            out.append(SchemaDifference(topic, MISSING_FIELD, path, catalog=field.type.describe()))
            continue
        out.extend(_compare_types(topic, path, field.type, other))
    for name, other in theirs.items():
        if name not in ours:
            out.append(SchemaDifference(topic, EXTRA_FIELD, prefix + name, registry=other.describe()))
    return out


def _compare_types(topic: str, path: str, ours: FieldType, theirs: SchemaField) -> list[SchemaDifference]:
    if ours.kind == "object" and theirs.kind == "object":
        return compare_fields(topic, ours.fields, theirs.fields, path + ".")
    if ours.kind in ("array", "map") and theirs.kind == ours.kind:
        assert ours.element is not None
        assert theirs.element is not None
        return _compare_types(topic, path + "[]", ours.element, theirs.element)
    if _same(ours.kind, theirs.kind):
        return []
    return [SchemaDifference(topic, TYPE_MISMATCH, path, catalog=ours.describe(), registry=theirs.describe())]


def _same(ours: str, theirs: str) -> bool:
    if ours == "timestamp-ms":
        return theirs in ("long", "timestamp-ms")
    return ours == theirs

"""Schemas from Pulsar's schema registry: fetch a topic's, and read its (Avro) record definition.

Producers that register a ``JSON`` or ``AVRO`` schema both store an Avro record definition (the
JSON schema type encodes records as JSON objects, the Avro type as Avro binary without a header).
:func:`record_fields` turns the definition into :class:`SchemaField` s, from which the source
builds its Spark and Arrow types and the catalog check compares field types.

Kinds: ``long int double float string boolean bytes timestamp-ms`` (a long with logical type
``timestamp-millis``), ``array`` / ``map`` (with ``element``) and ``object`` (a record, with
``fields``). A union with ``null`` is the other type, nullable; other unions are ``union``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from widehouse.contracts.types import REGISTRY_EXTRA_SPARK, SPARK_PAYLOAD_TYPES
from widehouse.errors import PulsarError
from widehouse.pulsar.admin import PulsarAdmin
from widehouse.pulsar.topics import TopicName

DECODABLE = ("JSON", "AVRO")
_PRIMITIVES = {
    "long": "long",
    "int": "int",
    "double": "double",
    "float": "float",
    "string": "string",
    "boolean": "boolean",
    "bytes": "bytes",
    "enum": "string",
}
_SPARK = {**SPARK_PAYLOAD_TYPES, **REGISTRY_EXTRA_SPARK}


@dataclass(frozen=True)
class SchemaField:
    name: str
    kind: str
    nullable: bool = False
    element: SchemaField | None = None
    fields: tuple[SchemaField, ...] = ()

    def describe(self) -> str:
        """The catalog's spelling: ``long``, ``array<string>``, ``map<string,object>``, ``object``."""
        if self.kind == "array" and self.element is not None:
            return f"array<{self.element.describe()}>"
        if self.kind == "map" and self.element is not None:
            return f"map<string,{self.element.describe()}>"
        return self.kind

    def spark_ddl(self) -> str:
        if self.kind == "array" and self.element is not None:
            return f"array<{self.element.spark_ddl()}>"
        if self.kind == "map" and self.element is not None:
            return f"map<string,{self.element.spark_ddl()}>"
        if self.kind == "object":
            return "struct<" + ",".join(f"`{f.name}`:{f.spark_ddl()}" for f in self.fields) + ">"
        if self.kind not in _SPARK:
            raise PulsarError(f"field {self.name}: registry type {self.kind!r} has no Spark type here")
        return _SPARK[self.kind]


@dataclass(frozen=True)
class RegisteredSchema:
    """A topic's latest registered schema: its type (``JSON``, ``AVRO``, ...) and definition text."""

    topic: str
    type: str
    definition: str
    version: int

    def fields(self) -> tuple[SchemaField, ...]:
        if self.type not in DECODABLE:
            raise PulsarError(f"{self.topic} has a {self.type} schema; only JSON and AVRO records are read")
        return record_fields(self.definition, self.topic)

    def spark_ddl(self) -> str:
        return ", ".join(f"`{f.name}` {f.spark_ddl()}" for f in self.fields())


def registered_schema(admin: PulsarAdmin, topic: TopicName | str) -> RegisteredSchema | None:
    """The latest schema registered for ``topic`` (a partitioned topic's own name), or None."""
    name = topic if isinstance(topic, TopicName) else TopicName.parse(topic)
    info = admin.schema(name.base)
    if info is None:
        return None
    return RegisteredSchema(
        topic=str(name.base),
        type=str(info.get("type", "")).upper(),
        definition=str(info.get("data", "")),
        version=int(info.get("version", 0)),
    )


def record_fields(definition: str, where: str) -> tuple[SchemaField, ...]:
    """The fields of an Avro record definition (JSON text); errors name ``where``."""
    try:
        record = json.loads(definition)
    except ValueError as exc:
        raise PulsarError(f"the registered schema of {where} is not JSON: {exc}") from exc
    if not isinstance(record, dict) or record.get("type") != "record":
        raise PulsarError(f"the registered schema of {where} is not an Avro record: {definition[:200]!r}")
    return tuple(_field(f["name"], f["type"], where) for f in record.get("fields", []))


def _field(name: str, avro: Any, where: str) -> SchemaField:  # noqa: PLR0911 (one return per Avro type)
    nullable = False
    if isinstance(avro, list):
        others = [t for t in avro if t != "null"]
        nullable = len(others) < len(avro)
        if len(others) != 1:
            return SchemaField(name, "union", nullable)
        avro = others[0]
    if isinstance(avro, str):
        if avro in _PRIMITIVES:
            return SchemaField(name, _PRIMITIVES[avro], nullable)
        raise PulsarError(f"{where}: field {name} has a named type {avro!r} this reader does not resolve")
    kind = avro.get("type")
    if avro.get("logicalType") == "timestamp-millis" and kind == "long":
        return SchemaField(name, "timestamp-ms", nullable)
    if kind == "array":
        return SchemaField(name, "array", nullable, element=_field(name, avro["items"], where))
    if kind == "map":
        return SchemaField(name, "map", nullable, element=_field(name, avro["values"], where))
    if kind == "record":
        fields = tuple(_field(f["name"], f["type"], where) for f in avro.get("fields", []))
        return SchemaField(name, "object", nullable, fields=fields)
    if isinstance(kind, str) and kind in _PRIMITIVES:
        return SchemaField(name, _PRIMITIVES[kind], nullable)
    raise PulsarError(f"{where}: field {name} has a registry type this reader does not know: {avro!r}")

"""``schema=registry``: decode ``value`` by the topic's registered JSON or Avro schema (executor side).

The rows then carry the record's fields as top-level columns, in the schema's order, before the
source's usual columns (``value`` keeps the raw bytes) and ``__decodeError``: null when the
payload decoded, else why it did not (its fields are then null). A bad payload neither fails the
query nor disappears. JSON payloads are parsed with orjson, Avro ones (binary, no header: what
Pulsar's Avro schema writes) with fastavro.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from widehouse.contracts.types import KIND_TYPES, REGISTRY_EXTRA_ARROW, arrow_type
from widehouse.errors import ConfigError
from widehouse.pulsar.schemas import RegisteredSchema, SchemaField
from widehouse.source.schema import COLUMNS, SCHEMA_DDL

if TYPE_CHECKING:
    import pyarrow as pa

DECODE_ERROR = "__decodeError"


@dataclass(frozen=True)
class ValueDecoder:
    """What executors need to decode: the schema type and its definition (plain, picklable)."""

    type: str
    definition: str
    topics: tuple[str, ...]

    @classmethod
    def of(cls, schemas: dict[str, RegisteredSchema | None]) -> ValueDecoder:
        """One decoder for all ``schemas`` (topic -> registered schema); they must agree."""
        missing = sorted(t for t, s in schemas.items() if s is None)
        if missing:
            raise ConfigError(f"option schema=registry: no schema is registered for {', '.join(missing)}")
        found = {t: s for t, s in schemas.items() if s is not None}
        kinds = {(s.type, json.dumps(json.loads(s.definition), sort_keys=True)) for s in found.values()}
        if len(kinds) > 1:
            described = ", ".join(f"{t} ({s.type} v{s.version})" for t, s in sorted(found.items()))
            raise ConfigError(
                f"option schema=registry needs one schema for all topics; they differ: {described}"
            )
        first = next(iter(found.values()))
        first.fields()  # raises for a type or definition the decoder cannot read
        names = {f.name for f in first.fields()}
        clash = sorted(names & {*COLUMNS, DECODE_ERROR})
        if clash:
            raise ConfigError(f"schema=registry: record field(s) {clash} clash with the source's columns")
        return cls(first.type, first.definition, tuple(sorted(found)))

    def fields(self) -> tuple[SchemaField, ...]:
        return RegisteredSchema(self.topics[0], self.type, self.definition, 0).fields()

    def spark_ddl(self) -> str:
        record = ", ".join(f"`{f.name}` {f.spark_ddl()}" for f in self.fields())
        return f"{record}, {SCHEMA_DDL}, `{DECODE_ERROR}` string"

    def decode(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The fields of every row's value, then the batch's columns and the decode errors."""
        import pyarrow as pa

        fields = self.fields()
        struct = pa.struct([pa.field(f.name, _arrow(f)) for f in fields])
        parse = _avro_parser(self.definition) if self.type == "AVRO" else _json_parser()
        records: list[Any] = []
        errors: list[str | None] = []
        for payload in batch.column(0).to_pylist():
            try:
                record = parse(payload)
                if not isinstance(record, dict):
                    raise ValueError(f"not a record but {type(record).__name__}")
                records.append(record)
                errors.append(None)
            except Exception as exc:  # any payload problem becomes a row with an error, never a crash
                records.append(None)
                errors.append(f"{self.type} decode failed: {exc}"[:500])
        try:
            decoded = pa.array(records, type=struct)
        except (pa.ArrowInvalid, pa.ArrowTypeError):  # one bad row: convert row by row, mark it
            decoded = _row_by_row(records, struct, errors)
        columns = decoded.flatten()  # with the struct's nulls (field(i) would show defaults)
        names = [f.name for f in fields]
        arrays = [*columns, *batch.columns, pa.array(errors, pa.string())]
        return pa.RecordBatch.from_arrays(arrays, names=[*names, *batch.schema.names, DECODE_ERROR])


def _row_by_row(records: list[Any], struct: pa.DataType, errors: list[str | None]) -> pa.Array:
    import pyarrow as pa

    for i, record in enumerate(records):
        try:
            pa.array([record], type=struct)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            records[i] = None
            errors[i] = f"does not match the registered schema: {exc}"[:500]
    return pa.array(records, type=struct)


def _json_parser() -> Any:
    import orjson

    return orjson.loads


def _avro_parser(definition: str) -> Any:
    import fastavro

    # logical types stay raw (a timestamp-millis stays epoch ms, as the Spark column is bigint)
    schema = fastavro.parse_schema(_without_logical_types(json.loads(definition)))

    def parse(payload: bytes) -> Any:
        return fastavro.schemaless_reader(io.BytesIO(payload), schema, None)

    return parse


def _without_logical_types(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _without_logical_types(v) for k, v in node.items() if k != "logicalType"}
    if isinstance(node, list):
        return [_without_logical_types(v) for v in node]
    return node


def _arrow(field: SchemaField) -> pa.DataType:
    import pyarrow as pa

    simple = {k: arrow_type(t.arrow_payload) for k, t in KIND_TYPES.items()}
    simple.update({k: arrow_type(name) for k, name in REGISTRY_EXTRA_ARROW.items()})
    if field.kind == "array" and field.element is not None:
        return pa.list_(_arrow(field.element))
    if field.kind == "map" and field.element is not None:
        return pa.map_(pa.string(), _arrow(field.element))
    if field.kind == "object":
        return pa.struct([pa.field(f.name, _arrow(f)) for f in field.fields])
    if field.kind not in simple:
        raise ConfigError(f"schema=registry: field {field.name} has type {field.kind!r}, which is not read")
    return simple[field.kind]

"""A topic's payload decoded straight into its declared fields, types checked in C (msgspec).

The fast path (:mod:`widehouse.stream.fastpath`) spends most of an event on parsing: ``orjson``
builds a dict of every value, then generated Python reads each declared field from it and checks
its type (~2.3 µs for a demo event here, ~1.3 of them ``orjson``). A ``msgspec`` decoder for a
struct of the topic's fields does both in one pass of C (~0.5 µs): it builds no dict, and it
refuses, with an exception, a value of the wrong type or out of its integer range.

It only stands in where it accepts *exactly* what ``orjson`` plus the fast path's checks accept,
with the same values; anything it refuses goes to the ``orjson`` path, which decides as before.
Where the two JSON parsers differ (checked in ``tests/unit/stream/test_decoders.py``), the
decoder refuses:

- **unknown fields** are refused (``forbid_unknown_fields``), in objects too. ``msgspec`` skips an
  unknown field's value without checking that its strings are valid UTF-8 or its numbers in a
  double's range, where ``orjson`` rejects the whole payload. Events with fields the catalog does
  not declare (accepted and ignored by the contract) therefore take the ``orjson`` path; the fast
  path stops trying this decoder for a task's topic once it misses most of that topic's events;
- a ``double`` is declared ``int | float``: ``msgspec`` would turn an integer into a float, where the
  fast path leaves that conversion to the reference path. The handler checks the type itself;
- kinds other than scalars, arrays and maps of scalars, and objects of these (an array or map of
  objects) get no decoder: the topic keeps the ``orjson`` path alone.

Decoders are made once per process per shape of fields (many topics share one), never pickled.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Any

import msgspec

from widehouse.catalog.semantics.parse import INTEGER_RANGES
from widehouse.catalog.types import Field, FieldType

Decode = Callable[[bytes], Any]
"""``decode(payload)`` -> a struct whose attributes ``f0``, ``f1``, ... hold the declared fields in
order (None where absent or null); raises on anything it does not accept."""

_Spec = tuple[tuple[str, Any], ...]
"""A shape of fields: (JSON name, kind spec) per field, hashable: the decoders' cache key."""

_DECODERS: dict[_Spec, Decode] = {}
_DECODERS_MAX = 4_096


def field_spec(fields: Sequence[Field]) -> _Spec | None:
    """The shape of ``fields`` as the decoder types it; None if a kind has no exact typed form."""
    spec: list[tuple[str, Any]] = []
    for field in fields:
        kind = _kind_spec(field.type)
        if kind is None:
            return None
        spec.append((field.name, kind))
    return tuple(spec)


def _kind_spec(kind: FieldType) -> Any:
    if kind.kind in INTEGER_RANGES or kind.kind in ("string", "double", "boolean"):
        return kind.kind
    if kind.kind in ("array", "map") and kind.element is not None and kind.element.is_scalar:
        return (kind.kind, kind.element.kind)
    if kind.kind == "object":
        inner = field_spec(kind.fields)
        return None if inner is None else ("object", inner)
    return None


def decoder(fields: Sequence[Field]) -> Decode | None:
    """The typed decoder of ``fields`` (made once per process per shape), or None if their kinds
    have no exact typed form."""
    spec = field_spec(fields)
    if spec is None:
        return None
    decode = _DECODERS.get(spec)
    if decode is None:
        if len(_DECODERS) >= _DECODERS_MAX:  # a long-lived worker that saw many catalogs
            _DECODERS.clear()
        decode = _DECODERS[spec] = msgspec.json.Decoder(_struct(spec, "Payload")).decode
    return decode


def _struct(spec: _Spec, name: str) -> type:
    """A struct with fields ``f0``, ``f1``, ... named in JSON as ``spec`` says, each None by default."""
    members = [(f"f{n}", _type(kind, f"{name}_{n}") | None, None) for n, (_json, kind) in enumerate(spec)]
    rename = {f"f{n}": json_name for n, (json_name, _kind) in enumerate(spec)}
    return msgspec.defstruct(name, members, rename=rename, forbid_unknown_fields=True, gc=False)


def _type(kind: Any, name: str) -> Any:
    if isinstance(kind, str):
        return _scalar(kind)
    if kind[0] == "object":
        return _struct(kind[1], name)
    element = _scalar(kind[1]) | None
    return list[element] if kind[0] == "array" else dict[str, element]  # type: ignore[valid-type]


def _scalar(kind: str) -> Any:
    if kind in INTEGER_RANGES:
        low, high = INTEGER_RANGES[kind]
        return Annotated[int, msgspec.Meta(ge=low, le=high)]
    # a double stays what the JSON holds: the handler sends an integer to the reference path
    return {"string": str, "boolean": bool, "double": int | float}[kind]

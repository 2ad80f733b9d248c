"""Field types of topic payloads (how each scalar maps to a store: :mod:`widehouse.contracts.types`).

Scalars: ``long`` (int64), ``int`` (int32), ``double``, ``string``, ``boolean``, ``timestamp-ms``
(epoch milliseconds as a JSON integer). Containers: ``array<T>``, ``map<string,T>`` (JSON objects
with arbitrary keys) and ``object`` (a nested JSON object with declared ``fields``); ``array<object>``
and ``map<string,object>`` take their element's fields from the same ``fields`` list.

Identifiers that reach SQL are checked by :func:`check_identifier`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from widehouse.contracts.types import KIND_TYPES, SPARK_PAYLOAD_TYPES

SCALARS: tuple[str, ...] = tuple(KIND_TYPES)
NUMERIC: frozenset[str] = frozenset({"long", "int", "double"})
INTEGRAL: frozenset[str] = frozenset({"long", "int", "timestamp-ms"})
ORDERED: frozenset[str] = frozenset({"long", "int", "double", "string", "timestamp-ms"})

IDENTIFIER_RE = re.compile(r"[a-z][a-z0-9_]{0,62}")  # always fullmatch: `$` lets "name\n" pass
INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)


def check_identifier(name: object) -> str | None:
    """None if ``name`` is a safe SQL identifier (``^[a-z][a-z0-9_]{0,62}$``), else what is wrong."""
    if not isinstance(name, str):
        return f"{name!r} is not a string"
    if not IDENTIFIER_RE.fullmatch(name):
        return (
            f"{name!r} is not a safe identifier: use lower-case letters, digits and _, "
            "starting with a letter, at most 63 characters"
        )
    return None


@dataclass(frozen=True)
class FieldType:
    """A payload type: a scalar, or ``array`` / ``map`` of an element, or ``object`` with fields."""

    kind: str
    element: FieldType | None = None
    fields: tuple[Field, ...] = ()

    @property
    def is_scalar(self) -> bool:
        return self.kind in SCALARS

    def _container(self, spell: Callable[[FieldType], str]) -> str | None:
        """``array<E>`` or ``map<string,E>`` with the element spelled by ``spell`` (the catalog and
        Spark write containers alike); None for a scalar or an object."""
        if self.kind not in ("array", "map"):
            return None
        assert self.element is not None
        return f"{'array<' if self.kind == 'array' else 'map<string,'}{spell(self.element)}>"

    def describe(self) -> str:
        """The catalog spelling: ``long``, ``array<string>``, ``map<string,object>``, ``object``."""
        return self._container(FieldType.describe) or self.kind

    def spark_ddl(self) -> str:
        """Spark SQL DDL of this type as it appears in a JSON payload (for ``from_json``)."""
        container = self._container(FieldType.spark_ddl)
        if container is not None:
            return container
        if self.kind == "object":
            return "struct<" + ",".join(f"`{f.name}`:{f.type.spark_ddl()}" for f in self.fields) + ">"
        return SPARK_PAYLOAD_TYPES[self.kind]


@dataclass(frozen=True)
class GenHints:
    """Optional hints for the traffic generator: realistic values for one field."""

    values: tuple[object, ...] = ()
    weights: tuple[float, ...] = ()
    range: tuple[float, float] | None = None
    length: tuple[int, int] | None = None
    null_rate: float = 0.0


@dataclass(frozen=True)
class Field:
    """A named field of a topic payload (or of a nested object)."""

    name: str
    type: FieldType
    description: str = ""
    gen: GenHints = GenHints()


class TypeSyntaxError(ValueError):
    """A type string that does not parse; the message says what is accepted."""


_TYPE_TOKEN = re.compile(r"\s*(<|>|,|[a-z][a-z0-9-]*)")


def parse_type(text: str, object_fields: tuple[Field, ...] | None = None) -> FieldType:
    """Parse a catalog type string. ``object`` (alone or as the innermost element) takes ``object_fields``.

    Raises :class:`TypeSyntaxError` for an unknown or malformed type.
    """
    tokens: list[str] = []
    pos = 0
    while pos < len(text):
        match = _TYPE_TOKEN.match(text, pos)
        if not match:
            raise TypeSyntaxError(f"cannot read type {text!r} at {text[pos:]!r}")
        tokens.append(match.group(1))
        pos = match.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    parser = _TypeParser(text, tokens, object_fields)
    result = parser.parse()
    if parser.index != len(tokens):
        raise TypeSyntaxError(f"unexpected {' '.join(tokens[parser.index :])!r} in type {text!r}")
    return result


class _TypeParser:
    def __init__(self, text: str, tokens: list[str], object_fields: tuple[Field, ...] | None) -> None:
        self.text = text
        self.tokens = tokens
        self.index = 0
        self.object_fields = object_fields

    def next(self) -> str:
        if self.index >= len(self.tokens):
            raise TypeSyntaxError(f"type {self.text!r} ends too early")
        token = self.tokens[self.index]
        self.index += 1
        return token

    def expect(self, token: str) -> None:
        got = self.next()
        if got != token:
            raise TypeSyntaxError(f"expected {token!r} but found {got!r} in type {self.text!r}")

    def parse(self) -> FieldType:
        name = self.next()
        if name in SCALARS:
            return FieldType(name)
        if name == "array":
            self.expect("<")
            element = self.parse()
            self.expect(">")
            return FieldType("array", element=element)
        if name == "map":
            self.expect("<")
            key = self.next()
            if key != "string":
                raise TypeSyntaxError(f"map keys must be string (JSON object keys), got {key!r}")
            self.expect(",")
            element = self.parse()
            self.expect(">")
            return FieldType("map", element=element)
        if name == "object":
            if not self.object_fields:
                raise TypeSyntaxError("an object type needs a non-empty 'fields' mapping")
            return FieldType("object", fields=self.object_fields)
        known = ", ".join((*SCALARS, "array<T>", "map<string,T>", "object"))
        raise TypeSyntaxError(f"unknown type {name!r}; known types: {known}")


def mentions_object(text: str) -> bool:
    """True if a type string has an ``object`` in it (and so needs ``fields``)."""
    return re.search(r"\bobject\b", text) is not None

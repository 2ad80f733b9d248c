"""Payload schemas in topic files: fields, their types, and the generator hints on them."""

from __future__ import annotations

from widehouse.catalog.problems import FileProblems, is_int, is_number, join, text_value
from widehouse.catalog.types import (
    INT32,
    INT64,
    INTEGRAL,
    NUMERIC,
    SCALARS,
    Field,
    FieldType,
    GenHints,
    TypeSyntaxError,
    mentions_object,
    parse_type,
)
from widehouse.catalog.yamlio import YList, YMap

MAX_FIELD_DEPTH = 8


def parse_fields(
    f: FileProblems, node: object, line: int, where: str, depth: int
) -> tuple[Field, ...] | None:
    if depth > MAX_FIELD_DEPTH:
        f.add(line, where, f"objects nest deeper than {MAX_FIELD_DEPTH} levels")
        return None
    if not isinstance(node, YMap) or not node:
        f.add(line, where, "expected a non-empty mapping of field name -> type")
        return None
    fields: list[Field] = []
    ok = True
    for name, spec in node.items():
        fwhere = join(where, name)
        fline = node.line_of(name)
        if not f.ident(name, fline, fwhere, "field name"):
            ok = False
            continue
        parsed = _parse_field(f, name, spec, line=fline, where=fwhere, depth=depth)
        if parsed is None:
            ok = False
            continue
        fields.append(parsed)
    return tuple(fields) if ok else None


def _parse_field(  # noqa: PLR0911 - one return per way a field can be wrong
    f: FileProblems, name: str, spec: object, *, line: int, where: str, depth: int
) -> Field | None:
    description = ""
    nested: tuple[Field, ...] | None = None
    opts: YMap | None = None
    type_text: object
    if isinstance(spec, str):
        type_text = spec
    elif isinstance(spec, YMap):
        if not f.keys(
            spec,
            where,
            ("type",),
            ("description", "fields", "values", "weights", "range", "length", "null_rate"),
        ):
            return None
        type_text = spec["type"]
        description = text_value(f, spec, "description", "")
        opts = spec
        if "fields" in spec:
            nested = parse_fields(f, spec["fields"], spec.line_of("fields"), f"{where}.fields", depth + 1)
            if nested is None:
                return None
    else:
        f.add(line, where, "expected a type (e.g. long) or a mapping with 'type'")
        return None
    if not isinstance(type_text, str):
        f.add(line, where, f"type {type_text!r} must be a string")
        return None
    if nested is not None and not mentions_object(type_text):
        f.add(line, where, f"'fields' is only for object types, not {type_text!r}")
        return None
    try:
        field_type = parse_type(type_text, nested)
    except TypeSyntaxError as exc:
        f.add(line, where, str(exc))
        return None
    hints = _parse_hints(f, opts, field_type, where) if opts is not None else GenHints()
    if hints is None:
        return None
    return Field(name, field_type, description, hints)


def _parse_hints(f: FileProblems, spec: YMap, field_type: FieldType, where: str) -> GenHints | None:  # noqa: PLR0912, PLR0915 - one flat list of checks reads best
    leaf = field_type
    while leaf.kind in ("array", "map") and leaf.element is not None:
        leaf = leaf.element
    ok = True
    values: tuple[object, ...] = ()
    weights: tuple[float, ...] = ()
    value_range: tuple[float, float] | None = None
    length: tuple[int, int] | None = None
    null_rate = 0.0
    if "values" in spec:
        raw = spec["values"]
        if leaf.kind not in SCALARS:
            f.add(
                spec.line_of("values"),
                f"{where}.values",
                "values are for scalar fields (or arrays/maps of them)",
            )
            ok = False
        elif not isinstance(raw, YList) or not raw:
            f.add(spec.line_of("values"), f"{where}.values", "expected a non-empty list")
            ok = False
        else:
            for value in raw:
                problem = value_problem(value, leaf.kind)
                if problem:
                    f.add(spec.line_of("values"), f"{where}.values", problem)
                    ok = False
            values = tuple(raw)
    if "weights" in spec:
        raw = spec["weights"]
        if not values or not isinstance(raw, YList) or len(raw) != len(values):
            f.add(spec.line_of("weights"), f"{where}.weights", "weights need values, one weight per value")
            ok = False
        elif not all(is_number(w) and w >= 0 for w in raw) or not any(w > 0 for w in raw):
            f.add(
                spec.line_of("weights"),
                f"{where}.weights",
                "weights must be non-negative numbers, not all 0",
            )
            ok = False
        else:
            weights = tuple(float(w) for w in raw)
    if "range" in spec:
        raw = spec["range"]
        numeric = leaf.kind in NUMERIC or leaf.kind == "timestamp-ms"
        if not numeric:
            f.add(spec.line_of("range"), f"{where}.range", f"range is for numbers, not {leaf.kind}")
            ok = False
        elif values:
            f.add(spec.line_of("range"), f"{where}.range", "give values or range, not both")
            ok = False
        elif (
            not isinstance(raw, YList)
            or len(raw) != 2
            or not all(is_number(x) for x in raw)
            or raw[0] > raw[1]
        ):
            f.add(spec.line_of("range"), f"{where}.range", "expected [low, high] numbers with low <= high")
            ok = False
        elif leaf.kind in INTEGRAL and not all(is_int(x) for x in raw):
            f.add(spec.line_of("range"), f"{where}.range", f"{leaf.kind} ranges take integers")
            ok = False
        else:
            value_range = (raw[0], raw[1])
    if "length" in spec:
        raw = spec["length"]
        if field_type.kind not in ("array", "map", "string"):
            f.add(spec.line_of("length"), f"{where}.length", "length is for arrays, maps and strings")
            ok = False
        elif (
            not isinstance(raw, YList)
            or len(raw) != 2
            or not all(is_int(x) and x >= 0 for x in raw)
            or raw[0] > raw[1]
        ):
            f.add(spec.line_of("length"), f"{where}.length", "expected [min, max] non-negative integers")
            ok = False
        else:
            length = (raw[0], raw[1])
    if "null_rate" in spec:
        raw = spec["null_rate"]
        if not is_number(raw) or not 0 <= raw < 1:
            f.add(spec.line_of("null_rate"), f"{where}.null_rate", "expected a number in [0, 1)")
            ok = False
        else:
            null_rate = float(raw)
    return GenHints(values, weights, value_range, length, null_rate) if ok else None


def value_problem(value: object, kind: str) -> str | None:
    if kind == "string":
        return None if isinstance(value, str) else f"{value!r} is not a string"
    if kind == "boolean":
        return None if isinstance(value, bool) else f"{value!r} is not a boolean"
    if kind == "double":
        return None if is_number(value) else f"{value!r} is not a number"
    low, high = INT32 if kind == "int" else INT64
    if not is_int(value) or not low <= value <= high:  # type: ignore[operator]
        return f"{value!r} is not a {kind}"
    return None

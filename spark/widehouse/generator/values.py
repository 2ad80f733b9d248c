"""Realistic field values for generated events, from the catalog's per-field hints.

A field may carry ``values`` (with optional ``weights``), ``range`` [low, high], ``length`` (arrays,
maps, strings) and ``null_rate``. Without hints: longs in [0, 10000], ints in [0, 1000], doubles in
[0, 1000) with two decimals, strings ``<field>_<n>``, fair booleans, up to 3 array/map elements.
Everything is drawn from the ``random.Random`` passed in, so values are deterministic for a seed.
"""

from __future__ import annotations

import random
from typing import Any

from widehouse.catalog.types import Field, FieldType, GenHints
from widehouse.contracts.periods import DAY_MS


def seeded(*parts: object) -> random.Random:
    """A ``random.Random`` seeded from ``parts`` (stable across runs and platforms).

    For deterministic synthetic data only, never for anything secret.
    """
    return random.Random(":".join(str(p) for p in parts))  # noqa: S311 - reproducible test data


_DEFAULT_RANGES: dict[str, tuple[float, float]] = {
    "long": (0, 10_000),
    "int": (0, 1_000),
    "double": (0.0, 1000.0),
}


def field_value(rng: random.Random, field: Field, base_ms: int) -> Any:
    """A JSON-ready value for ``field`` (None with probability ``null_rate``)."""
    hints = field.gen
    if hints.null_rate and rng.random() < hints.null_rate:
        return None
    return _value(rng, field.type, hints, field.name, base_ms)


def object_value(
    rng: random.Random, fields: tuple[Field, ...], base_ms: int, skip: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """Values for every field of an object, in declaration order (fields in ``skip`` left out)."""
    return {f.name: field_value(rng, f, base_ms) for f in fields if f.name not in skip}


def _value(rng: random.Random, kind: FieldType, hints: GenHints, name: str, base_ms: int) -> Any:
    if kind.kind == "array":
        assert kind.element is not None
        low, high = hints.length or (0, 3)
        return [_element(rng, kind.element, hints, name, base_ms) for _ in range(rng.randint(low, high))]
    if kind.kind == "map":
        assert kind.element is not None
        low, high = hints.length or (0, 3)
        size = rng.randint(low, high)
        keys = sorted(rng.sample(range(max(size, 8)), size))
        return {f"k{k}": _element(rng, kind.element, hints, name, base_ms) for k in keys}
    if kind.kind == "object":
        return object_value(rng, kind.fields, base_ms)
    return _scalar(rng, kind.kind, hints, name, base_ms)


def _element(rng: random.Random, kind: FieldType, hints: GenHints, name: str, base_ms: int) -> Any:
    if kind.kind == "object":
        return object_value(rng, kind.fields, base_ms)
    if kind.kind in ("array", "map"):
        return _value(rng, kind, GenHints(), name, base_ms)
    return _scalar(
        rng, kind.kind, GenHints(values=hints.values, weights=hints.weights, range=hints.range), name, base_ms
    )


def _scalar(rng: random.Random, kind: str, hints: GenHints, name: str, base_ms: int) -> Any:  # noqa: PLR0911
    if hints.values:
        if hints.weights:
            return rng.choices(hints.values, weights=hints.weights)[0]
        return rng.choice(hints.values)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "string":
        shortest, longest = hints.length or (0, 0)
        if longest:
            alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
            return "".join(rng.choice(alphabet) for _ in range(rng.randint(shortest, longest)))
        return f"{name}_{rng.randrange(20)}"
    if kind == "timestamp-ms":
        if hints.range:
            return rng.randint(int(hints.range[0]), int(hints.range[1]))
        return base_ms - rng.randrange(DAY_MS)
    low, high = hints.range or _DEFAULT_RANGES[kind]
    if kind == "double":
        return round(rng.uniform(float(low), float(high)), 4 if float(high) - float(low) < 1 else 2)
    return rng.randint(int(low), int(high))

"""The one family of typed text-value parsers: settings, source and sink options and the CLI use it.

Each parser takes the text (already stripped) and returns the value or raises
:class:`ValueTextError`, which holds the bad text, the problem (``must be true or false``,
``is not an integer``, ``must be >= 1``) and, when the caller passes it, the name of the option or
variable. Each family words its errors from those parts:

- settings: ``WIDEHOUSE_SPARK_UI='maybe' is invalid: must be true or false``;
- source and sink options: ``option failOnDataLoss='maybe' must be true or false``;
- the CLI (argparse ``type=``): ``'x' is not an integer`` (argparse adds the flag).

The accepted text, the same everywhere:

- booleans: ``true/false``, ``1/0``, ``yes/no``, ``on/off``, case-insensitive (:data:`TRUE_WORDS`,
  :data:`FALSE_WORDS`);
- integers: decimal (``int()`` syntax), optionally bounded; floats: finite decimals, optionally
  bounded;
- durations: a number with a unit ``ms``, ``s``/``sec``, ``m``/``min``, ``h``, ``d``
  (case-insensitive); a bare number is in the caller's unit (:func:`parse_duration`);
- byte sizes and rates: ``20000000``, ``20M``, ``20MB``, ``20MB/s`` (decimal k, M, G);
- choices: one of a fixed set of words, as written.

Light: standard library only; safe to import from DAG files.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")
N = TypeVar("N", int, float)

TRUE_WORDS = frozenset({"true", "1", "yes", "on"})
"""The words read as true (compared lowercased)."""
FALSE_WORDS = frozenset({"false", "0", "no", "off"})
"""The words read as false (compared lowercased)."""

_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|sec|m|min|h|d)?\s*$", re.IGNORECASE)
_UNIT_MS = {"ms": 1, "s": 1000, "sec": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}
DURATION_EXAMPLE = "e.g. 500ms, 30s, 10m, 24h, 7d"
_BYTES_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([kKMG]?)(?:B(?:/s)?)?\s*$")
_BYTES_SCALE = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9}


class ValueTextError(ValueError):
    """A text value that does not parse: the text, what is wrong with it, and (if known) whose it is.

    ``str()`` is ``<name>=<text!r> <problem>`` with a name, ``<text!r> <problem>`` without;
    :attr:`problem` alone is the predicate (``must be true or false``).
    """

    def __init__(self, text: str, problem: str, name: str | None = None) -> None:
        self.text = text
        self.problem = problem
        self.name = name
        subject = f"{name}={text!r}" if name else repr(text)
        super().__init__(f"{subject} {problem}")


def parse_bool(text: str, name: str | None = None) -> bool:
    """``true/false``, ``1/0``, ``yes/no``, ``on/off`` (any case)."""
    lowered = text.strip().lower()
    if lowered in TRUE_WORDS:
        return True
    if lowered in FALSE_WORDS:
        return False
    raise ValueTextError(text, "must be true or false", name)


def parse_int(
    text: str, name: str | None = None, minimum: int | None = None, maximum: int | None = None
) -> int:
    """A decimal integer within ``[minimum, maximum]`` (either bound optional)."""
    return _number(text, int, "is not an integer", name=name, minimum=minimum, maximum=maximum)


def parse_float(
    text: str, name: str | None = None, minimum: float | None = None, maximum: float | None = None
) -> float:
    """A finite decimal number within ``[minimum, maximum]`` (either bound optional)."""
    return _number(text, float, "is not a number", name=name, minimum=minimum, maximum=maximum)


def _number(
    text: str,
    convert: Callable[[str], N],
    problem: str,
    *,
    name: str | None,
    minimum: float | None,
    maximum: float | None,
) -> N:
    """``convert(text)`` (``problem`` words a text it rejects), finite and within the bounds."""
    try:
        number = convert(text)
    except ValueError:
        raise ValueTextError(text, problem, name) from None
    if not math.isfinite(number):
        raise ValueTextError(text, "must be a finite number", name)
    if minimum is not None and maximum is not None and not minimum <= number <= maximum:
        raise ValueTextError(text, f"must be between {minimum} and {maximum}", name)
    if minimum is not None and number < minimum:
        raise ValueTextError(text, f"must be >= {minimum}", name)
    if maximum is not None and number > maximum:
        raise ValueTextError(text, f"must be <= {maximum}", name)
    return number


def parse_duration_ms(text: str, name: str | None = None, bare_unit: str | None = "ms") -> float:
    """A duration in milliseconds: ``500ms``, ``30s``, ``10m``, ``1.5h``, ``7d``.

    A bare number is in ``bare_unit`` (``"ms"``, ``"s"``, ...); with ``bare_unit=None`` a unit is required.
    """
    match = _DURATION_RE.match(text)
    if not match:
        raise ValueTextError(text, f"is not a duration ({DURATION_EXAMPLE})", name)
    unit = match.group(2) or bare_unit
    if unit is None:
        raise ValueTextError(text, f"has no unit; write e.g. {match.group(1)}s or {match.group(1)}m", name)
    return float(match.group(1)) * _UNIT_MS[unit.lower()]


def parse_bytes(text: str, name: str | None = None, problem: str = "is not a number of bytes") -> float:
    """Bytes (or bytes/s): ``20000000``, ``20M``, ``20MB``, ``20MB/s``, ``1.5k`` (k = 1e3, M = 1e6, G = 1e9).

    Never negative; ``problem`` words the error for a text that is not such a number.
    """
    match = _BYTES_RE.match(text)
    if not match:
        raise ValueTextError(text, problem, name)
    return float(match.group(1)) * _BYTES_SCALE[match.group(2)]


def parse_rate(text: str, name: str | None = None) -> float:
    """A positive rate in bytes/s, written as :func:`parse_bytes` reads it (``20000000``, ``20M``,
    ``20MB/s``)."""
    value = parse_bytes(text, name, problem="is not a rate; use bytes/s such as 20000000, 20M or 20MB")
    if value <= 0:
        raise ValueTextError(text, "must be > 0", name)
    return value


def parse_fraction(text: str, name: str | None = None) -> float:
    """A share in ``(0, 1]``."""
    value = parse_float(text, name)
    if not 0 < value <= 1:
        raise ValueTextError(text, "must be in (0, 1]", name)
    return value


def parse_choice(text: str, choices: Iterable[str], name: str | None = None) -> str:
    """One of ``choices``, as written."""
    allowed = tuple(choices)
    if text not in allowed:
        raise ValueTextError(text, f"must be one of {', '.join(allowed)}", name)
    return text


def for_argparse(parse: Callable[[str], T]) -> Callable[[str], T]:
    """``parse`` as an argparse ``type=``: a :class:`ValueTextError` becomes the usage error's text."""

    def parse_argument(text: str) -> T:
        try:
            return parse(text)
        except ValueTextError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse_argument.__name__ = getattr(parse, "__name__", "value")
    return parse_argument

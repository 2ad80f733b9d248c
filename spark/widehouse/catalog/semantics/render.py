"""Bounded, failure-proof rendering of values and exceptions for error messages.

A quarantine detail names the bad value, but the value comes from a hostile producer: a list nested
1,000 levels deep (``repr`` raises ``RecursionError``), a 10 MB string (``repr`` copies it whole to
keep 60 characters), an integer of 100,000 digits (``repr`` raises ``ValueError`` past Python's
``int_max_str_digits``). :func:`render_value` looks at no more of a value than it prints: containers
at most :data:`MAX_DEPTH` levels down, items and characters only until ``limit`` is reached, so its
cost is bounded whatever the value; and it never raises (anything unexpected renders as the type's
name). :func:`render_exception` does the same for an exception caught at the transform's error
boundary.
"""

from __future__ import annotations

from typing import Any

MAX_DEPTH = 3
"""Containers deeper than this render as ``[...]`` / ``{...}``."""
DEFAULT_LIMIT = 60
"""Characters of a rendered value (longer renderings are cut and end with ``...``)."""
_MAX_INT_BITS = 256  # larger integers render as <int of N bits> (their digits are no help, and costly)


class _Out:
    """Pieces of a rendering, and whether it already holds more than ``limit`` characters."""

    __slots__ = ("limit", "parts", "size")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts: list[str] = []
        self.size = 0

    def add(self, text: str) -> None:
        self.parts.append(text)
        self.size += len(text)

    def full(self) -> bool:
        return self.size > self.limit


def render_value(value: Any, limit: int = DEFAULT_LIMIT, depth: int = MAX_DEPTH) -> str:
    """``repr``-like text of ``value``, at most ``limit`` characters (cut ones end with ``...``).

    Reads at most ``depth`` container levels and only as many items and characters as it prints;
    never raises (a value that cannot be rendered gives ``<TypeName>``)."""
    limit = max(limit, 4)
    out = _Out(limit)
    try:
        _render(value, depth, out)
        text = "".join(out.parts)
    except Exception:  # rendering must never fail: a hostile value renders as its type
        return _type_name(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def render_exception(exc: BaseException, limit: int = 200) -> str:
    """``ClassName: message`` of ``exc``, at most ``limit`` characters (before escaping a lone
    surrogate, so the text is always valid UTF-8); never raises."""
    name = _type_name(exc)[1:-1]
    try:
        message = str(exc)
    except Exception:  # an exception whose __str__ fails is still named by its class
        message = "<message not renderable>"
    text = f"{name}: {message}" if message else name
    text = text if len(text) <= limit else text[: limit - 3] + "..."
    # a lone surrogate in a message could not be written to the quarantine's string column
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _type_name(value: Any) -> str:
    try:
        return f"<{type(value).__name__}>"
    except Exception:  # a metaclass with a failing __name__: still say something
        return "<value>"


def _render(value: Any, depth: int, out: _Out) -> None:  # noqa: PLR0912 - one branch per JSON type
    if out.full():
        return
    if value is None or isinstance(value, bool):
        out.add("None" if value is None else ("True" if value else "False"))
    elif isinstance(value, int):
        bits = int.bit_length(value)
        out.add(int.__repr__(value) if bits <= _MAX_INT_BITS else f"<int of {bits} bits>")
    elif isinstance(value, float):
        out.add(float.__repr__(value))
    elif isinstance(value, str):
        out.add(str.__repr__(str(value[: out.limit + 1])))  # a longer string is cut anyway
    elif isinstance(value, bytes | bytearray):
        out.add(bytes.__repr__(bytes(value[: out.limit + 1])))
    elif isinstance(value, list | tuple):
        opening, closing = ("[", "]") if isinstance(value, list) else ("(", ")")
        if depth <= 0:
            out.add(f"{opening}...{closing}" if value else opening + closing)
            return
        out.add(opening)
        for i, item in enumerate(value):
            if out.full():
                return
            if i:
                out.add(", ")
            _render(item, depth - 1, out)
        out.add(closing)
    elif isinstance(value, dict):
        if depth <= 0:
            out.add("{...}" if value else "{}")
            return
        out.add("{")
        for i, (key, item) in enumerate(value.items()):
            if out.full():
                return
            if i:
                out.add(", ")
            _render(key, depth - 1, out)
            out.add(": ")
            _render(item, depth - 1, out)
        out.add("}")
    else:  # not a JSON value: its type, never its own (unbounded, maybe failing) repr
        out.add(_type_name(value))

"""How a variable is declared: its name, default, parser, target field; a default derived from others."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from widehouse.settings.masking import mask_url

T = TypeVar("T")


@dataclass(frozen=True)
class Derived(Generic[T]):
    """A default computed from other values at load time.

    ``compute`` receives a mapping with exactly the names in ``uses``: a ``WIDEHOUSE_*`` name gives
    that variable's parsed value (resolved first), any other name (``JAVA_HOME``) the raw environment
    value or None. ``doc`` is the default as documented (``<state>/delta``).
    """

    doc: str
    uses: tuple[str, ...]
    compute: Callable[[Mapping[str, Any]], T]


@dataclass(frozen=True)
class Variable(Generic[T]):
    """One environment variable: where it goes, how it is parsed, and what it defaults to."""

    name: str
    default: T | Derived[T]
    """The parsed default value, or a :class:`Derived` default computed from other variables."""
    parse: Callable[[str], T]
    """Turns the stripped, non-blank text (blank too with ``blank_is_value``) into the value."""
    target: str
    """Dotted path of the :class:`Settings` field it sets (``local.pulsar_broker_port``)."""
    help: str
    secret: bool = False
    """Never echoed: errors say what is wrong without the value, reprs and `widehouse config` mask it."""
    blank_is_value: bool = False
    """A set but blank variable is parsed (``WIDEHOUSE_SPARK_JARS=`` means no jars) instead of unset."""
    doc: str | None = None
    """The documented default when the value alone does not say it (None meaning embedded Derby)."""
    mask: Callable[[str], str] | None = None
    """How a bad (non-secret) value is shown in errors; :func:`mask_url` unless set."""

    @property
    def documented_default(self) -> str:
        """The default as the README and ``widehouse config --variables`` show it."""
        if self.doc is not None:
            return self.doc
        if isinstance(self.default, Derived):
            return self.default.doc
        return format_value(self.default)

    def shown(self, text: str) -> str:
        """How a bad value appears in an error: ``NAME='value'``, credentials masked; secrets never."""
        if self.secret:
            return self.name
        return f"{self.name}={(self.mask or mask_url)(text)!r}"


@dataclass(frozen=True)
class DerivedField:
    """A :class:`Settings` field no variable sets: it follows from other variables."""

    target: str
    default: Derived[Any]


def format_value(value: object) -> str:
    """A parsed value written back as a variable's text (``0.8``, ``20000000``, ``clickhouse,delta``)."""
    if value is None or value == ():
        return "(none)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, tuple):
        return ",".join(format_value(v) for v in value)
    return str(value)

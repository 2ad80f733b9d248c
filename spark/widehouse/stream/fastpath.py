"""A topic's parse + classify + fold for the common case, compiled to one specialised function.

The transform's reference path (:func:`widehouse.catalog.semantics.parse.parse_event`, then
:func:`widehouse.catalog.semantics.fold.fold_event`) interprets the catalog for every event: a loop
over the topic's fields, a closure per column rule, an ``Accepted`` object, a list of pending changes.
For the ~98% of events that are valid, on time and far from any overflow, the same work can be done
by straight-line code written for the topic: :func:`compile_handler` generates it once per topic per
executor (from the catalog, so it is never pickled) and ``exec``-s it.

The handler either does *exactly* what the reference path would do for that event and returns its
event time, or returns ``None`` having changed nothing, and the caller runs the reference path,
which decides rejections, lateness and overflow with their messages. It therefore only accepts:

- a payload that ``orjson`` parses to an object, within ``max_payload_bytes``;
- every declared scalar field absent, null, or already of its exact Python type (a ``double`` field
  holding an integer, which the reference converts, goes to the reference path); the same holds
  inside objects and for the elements of arrays and maps of scalars, checked inline (an object's
  fields become locals that paths read; the object itself becomes the dict the reference builds,
  where a rule reads it whole); other containers go through the reference's own check
  (:func:`check_value`), and paths into them read its converted value, as the reference's parsed
  row does;
- key and event time present, the event time neither absurd nor late;
- every ``sum`` it feeds staying in its type's range.

Every check (values, filters, sums, the comparisons of min / max / first / last) runs before the first
table changes, and the changes only store, so an exception anywhere in a handler leaves every table
as it was (the transform quarantines the message with reason ``internal``).

Where the topic's fields have a typed form (:mod:`widehouse.stream.decoders`: scalars, arrays and
maps of scalars, objects of these), the handler first decodes the payload straight into a struct of
them, types and ranges checked in C, and reads only the fields its rules use (~1 µs less an event).
A payload that decoder refuses (a wrong type, an undeclared field, anything where it and ``orjson``
could disagree) goes to the ``orjson`` code above (``json_handle``), which decides as before; a
task's handler stops trying the decoder for a topic once it misses a quarter of that topic's events
(:data:`TYPED_MISSES`).

Topics it cannot specialise (two ``sum`` rules, or two min / max / first / last rules, on one column of
a table) get no handler: all their events take the reference path. Generated code names nothing
from the catalog as code: field names are ``repr`` string constants, literals and paths live in the
function's globals, locals are numbered.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import CodeType
from typing import Any

import orjson

from widehouse.catalog.eventtime import EventTimeRules
from widehouse.catalog.filters import (
    And,
    Compare,
    Expr,
    FieldRef,
    InList,
    IsNull,
    Literal,
    Not,
    Or,
    Path,
    get_path,
)
from widehouse.catalog.model import Topic, WideTable
from widehouse.catalog.semantics.fold import WideRows, sum_in_range
from widehouse.catalog.semantics.parse import INTEGER_RANGES, check_value
from widehouse.catalog.types import FieldType
from widehouse.stream import decoders

Handler = Callable[[bytes, int], int | None]
"""``handler(payload, publish_ms)`` -> the event time if the event was folded, None if not touched."""

_PY_OPS = {"=": "==", "<>": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


class _Filters:
    """Renders filters to Python expressions with the reference's three-valued logic
    (:func:`widehouse.catalog.filters.compile_predicate`): ``holds(e, True)`` is an expression that
    is True exactly when ``e`` is *true* (not false, not unknown), ``holds(e, False)`` when it is
    *false*."""

    def __init__(
        self, env: dict[str, Any], top: dict[str, str], inner: dict[tuple[str, ...], str] | None = None
    ) -> None:
        self.env = env
        self.top = top  # top-level field name -> the local holding its checked value
        self.inner = inner or {}  # a path into an object field checked inline -> the local holding it

    def _constant(self, value: object) -> str:
        name = f"L{len([k for k in self.env if k.startswith('L')])}"
        self.env[name] = value
        return name

    def ref(self, path: Path) -> str:
        """The expression reading ``path``: the local of its longest prefix held in one, then
        ``get_path`` for the rest (as the reference reads the parsed row)."""
        for cut in range(len(path), 1, -1):
            held = self.inner.get(tuple(path[:cut]))
            if held is not None:
                return held if cut == len(path) else f"get_path({held}, {self._constant(path[cut:])})"
        if len(path) == 1:
            return self.top[path[0]]
        return f"get_path({self.top[path[0]]}, {self._constant(path[1:])})"

    def _operand(self, node: FieldRef | Literal) -> tuple[str, bool]:
        """(expression, may be None)."""
        if isinstance(node, Literal):
            return self._constant(node.value), False
        return self.ref(node.path), True

    def _compare(self, e: Compare, negate: bool) -> str:
        (a, a_null), (b, b_null) = self._operand(e.left), self._operand(e.right)
        known = [f"{x} is not None" for x, nullable in ((a, a_null), (b, b_null)) if nullable]
        test = f"{a} {_PY_OPS[e.op]} {b}"
        return "(" + " and ".join([*known, f"not ({test})" if negate else f"({test})"]) + ")"

    def true(self, e: Expr) -> str:
        """An expression that is True exactly when ``e`` is *true* (not false, not unknown)."""
        return self.holds(e, True)

    def holds(self, e: Expr, value: bool) -> str:
        """An expression that is True exactly when ``e`` evaluates to ``value`` (never when unknown):
        false is the dual of true (and/or swapped, each test negated), a ``Not`` flips which."""
        if isinstance(e, And | Or):
            joiner = " and " if isinstance(e, And) == value else " or "
            return "(" + joiner.join(self.holds(i, value) for i in e.items) + ")"
        if isinstance(e, Not):
            return self.holds(e.item, not value)
        if isinstance(e, Compare):
            return self._compare(e, negate=not value)
        if isinstance(e, InList):
            v = self.ref(e.operand.path)
            values = self._constant(tuple(x.value for x in e.values))
            return f"({v} is not None and {v} {'in' if value != e.negated else 'not in'} {values})"
        if isinstance(e, IsNull):
            return f"({self.ref(e.operand.path)} is {'' if value != e.negated else 'not '}None)"
        v = self.ref(e.operand.path)
        return f"({v} is not None and {f'bool({v})' if value else f'not {v}'})"


@dataclass(frozen=True)
class HandlerTemplate:
    """A topic's handler before it is bound to a task's tables: its code and its constants.

    Generating and compiling the code depends on the catalog only, so :mod:`widehouse.stream.plan`
    keeps one template per topic and plan in each Python worker; a task then only binds its own
    tables' state (:meth:`bind`, a few µs) instead of generating the code again (~50 µs a topic,
    ~13 ms a task with 250 topics)."""

    topic: str
    code: CodeType
    constants: Mapping[str, Any]
    """The handler's globals except the tables' state (``R<t>``, ``E<t>``), which :meth:`bind` adds."""
    source: str
    tables: int
    typed: bool = False
    """Whether the handler tries the typed decoder (:mod:`widehouse.stream.decoders`) first."""

    def bind(self, tables: Sequence[WideRows]) -> Handler:
        """The handler folding into ``tables`` (the tables the template was made for, same order)."""
        if len(tables) != self.tables:
            raise ValueError(
                f"the handler of {self.topic} folds into {self.tables} tables, not {len(tables)}"
            )
        env = dict(self.constants)
        for t, rows in enumerate(tables):
            env[f"R{t}"], env[f"E{t}"] = rows.rows, rows.empty
        if self.typed:
            env["TS"] = [0, 0]  # this handler's typed decodes and misses (negative decodes: off)
        exec(self.code, env)  # noqa: S102 - code generated from the catalog (see the module docstring)
        handler: Handler = env["handle"]
        handler.__doc__ = self.source  # what it runs, for a reader in a debugger
        return handler


def compile_handler(
    topic: Topic, tables: list[WideRows], rules: EventTimeRules, max_payload_bytes: int
) -> Handler | None:
    """The specialised handler of ``topic`` folding into ``tables`` (the tables it feeds, in the
    order the reference folds them), or None if the topic must always take the reference path."""
    periods = [(rows.table, rows.period_ms) for rows in tables]
    template = handler_template(topic, periods, rules, max_payload_bytes)
    return None if template is None else template.bind(tables)


def handler_template(
    topic: Topic, tables: Sequence[tuple[WideTable, int]], rules: EventTimeRules, max_payload_bytes: int
) -> HandlerTemplate | None:
    """:func:`compile_handler`'s code for ``tables`` (each with its period in ms), not yet bound to
    any table's state; None if the topic must always take the reference path."""
    names = [f.name for f in topic.fields]
    if topic.key not in names or topic.event_time not in names:
        return None
    env: dict[str, Any] = {
        "loads": orjson.loads,
        "isfinite": math.isfinite,
        "in_range": sum_in_range,
        "check": check_value,
        "get_path": get_path,
        "dict_type": dict,
        "int_type": int,
        "float_type": float,
        "str_type": str,
        "bool_type": bool,
        "list_type": list,
    }
    local = {f.name: f"f{i}" for i, f in enumerate(topic.fields)}
    inner: dict[tuple[str, ...], str] = {}
    lines = _parse_lines(topic, env, local, inner, max_payload_bytes)
    checks: list[str] = []  # values, filters and overflow checks: nothing changes before they pass
    applies: list[str] = []
    filters = _Filters(env, local, inner)
    keyed: dict[int, int] = {}  # period ms -> the first table keyed by it
    for t, (table, period_ms) in enumerate(tables):
        lines_of_table = _table_lines(t, table, period_ms, topic, env, local, filters, keyed)
        if lines_of_table is None:
            return None
        checks += lines_of_table[0]
        applies += lines_of_table[1]
    tail = [*_time_lines(topic, local, rules), *checks, *applies, f"    return {local[topic.event_time]}"]
    source = "\n".join([*_unread_objects_unbuilt(lines, tail), *tail, ""])
    decode = decoders.decoder(topic.fields)
    if decode is not None:  # the typed decoder first; the orjson path for what it refuses
        env["decode"] = decode
        typed = _typed_lines(topic, max_payload_bytes)
        source = "\n".join(
            [
                source.replace("def handle(", "def json_handle(", 1),
                *_unread_fields_unread(_unread_objects_unbuilt(typed, tail), tail),
                *tail,
                "",
            ]
        )
    code = _compiled(source, f"<widehouse fast path: {topic.name}>")
    return HandlerTemplate(str(topic.name), code, env, source, len(tables), decode is not None)


_CODE: dict[str, CodeType] = {}
"""Compiled handlers by source, kept for the process: the plans of one app (the warm-up's, each
group's) generate the same source for a topic, and topics of one shape (many event kinds share
their fields and rules) generate the same source as each other. Compiling is most of a handler's
cost (~0.4 ms a topic, ~0.45 s per worker with 1,000 topics); the source only changes with the
catalog."""
_CODE_MAX = 16_384


def _compiled(source: str, filename: str) -> CodeType:
    """``source`` compiled once per process; the code (and the handler's, inside it) named ``filename``."""
    code = _CODE.get(source)
    if code is None:
        if len(_CODE) >= _CODE_MAX:  # a long-lived worker that saw many catalogs: start over
            _CODE.clear()
        code = _CODE[source] = compile(source, filename, "exec")
    return code if code.co_filename == filename else _named(code, filename)


def _named(code: CodeType, filename: str) -> CodeType:
    """``code`` and the code objects inside it with ``filename`` (a traceback names the topic)."""
    consts = tuple(_named(c, filename) if isinstance(c, CodeType) else c for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


def _parse_lines(
    topic: Topic,
    env: dict[str, Any],
    local: dict[str, str],
    inner: dict[tuple[str, ...], str],
    max_payload_bytes: int,
) -> list[str]:
    """Parse with ``orjson`` and check every declared field: ``return None`` on any doubt. Objects'
    fields checked inline get locals of their own, recorded in ``inner`` by path."""
    lines = [
        "def handle(body, publish_ms):",
        f"    if not body or len(body) > {int(max_payload_bytes)}:",
        "        return None",
        "    try:",
        "        d = loads(body)",
        "    except Exception:",
        "        return None",
        "    if type(d) is not dict_type:",
        "        return None",
    ]
    for field in topic.fields:
        v = local[field.name]
        lines.append(f"    {v} = d.get({field.name!r})")
        lines += _value_lines(field.type, v, "    ", env, inner, (field.name,))
    return lines


def _time_lines(topic: Topic, local: dict[str, str], rules: EventTimeRules) -> list[str]:
    """Key and event time present, the event time neither absurd nor late: ``return None`` if not."""
    key, et = local[topic.key], local[topic.event_time]
    return [
        f"    if {key} is None or {et} is None or {et} <= 0:",
        "        return None",
        f"    behind = publish_ms - {et}",
        f"    if -behind > {rules.max_future_ms} or behind > {min(rules.max_age_ms, rules.lateness_ms)}:",
        "        return None",
    ]


TYPED_MISSES = 64
"""Typed decodes a handler may miss before it looks at their share: once at least this many missed
and they are a quarter of its tries, the handler leaves the typed decoder (its topic's events carry
fields the catalog does not declare, which the decoder refuses) and parses with ``orjson`` alone."""


def _typed_lines(topic: Topic, max_payload_bytes: int) -> list[str]:
    """The typed decoder's ``handle``: the same locals as :func:`_parse_lines`, or the ``orjson``
    path (``json_handle``) for a payload the decoder refuses."""
    lines = [
        "def handle(body, publish_ms):",
        f"    if not body or len(body) > {int(max_payload_bytes)}:",
        "        return None",
        "    if TS[0] < 0:",
        "        return json_handle(body, publish_ms)",
        "    TS[0] += 1",
        "    try:",
        "        d = decode(body)",
        "    except Exception:",
        "        TS[1] += 1",
        f"        if TS[1] >= {TYPED_MISSES} and TS[1] * 4 >= TS[0]:",
        "            TS[0] = -1",
        "        return json_handle(body, publish_ms)",
    ]
    for n, field in enumerate(topic.fields):
        lines += _typed_value_lines(field.type, f"f{n}", f"d.f{n}", "    ")
    return lines


def _typed_value_lines(kind: FieldType, v: str, source: str, ind: str) -> list[str]:
    """Lines leaving in ``v`` what :func:`_value_lines` leaves there, read from the decoded struct:
    the decoder checked every type and range except a double's (an integer goes to the reference
    path, which converts it); an object becomes the same dict of its fields' locals."""
    lines = [f"{ind}{v} = {source}"]
    refused = "type({0}) is not float_type or not isfinite({0})"
    if kind.kind == "double":
        lines += [f"{ind}if {v} is not None and ({refused.format(v)}):", f"{ind}    return None"]
    elif kind.kind in ("array", "map") and kind.element is not None and kind.element.kind == "double":
        items = v if kind.kind == "array" else f"{v}.values()"
        lines += [
            f"{ind}if {v} is not None:",
            f"{ind}    for x in {items}:",
            f"{ind}        if x is not None and ({refused.format('x')}):",
            f"{ind}            return None",
        ]
    elif kind.kind == "object":
        subs = [(f, f"{v}_{n}") for n, f in enumerate(kind.fields)]
        if not subs:
            return [*lines, f"{ind}{v} = {{}} if {v} is not None else None"]
        lines += [f"{ind}{' = '.join(sub for _, sub in subs)} = None", f"{ind}if {v} is not None:"]
        for n, (_field, sub) in enumerate(subs):
            lines += _typed_value_lines(_field.type, sub, f"{v}.f{n}", ind + "    ")
        built = ", ".join(f"{field.name!r}: {sub}" for field, sub in subs)
        lines.append(f"{ind}    {v} = {{{built}}}")
    return lines


_BUILD = re.compile(r"\s+(f\d+(?:_\d+)*) = \{")
_LOCAL = re.compile(r"\bf\d+(?:_\d+)*\b")


def _unread_objects_unbuilt(lines: list[str], tail: list[str]) -> list[str]:
    """``lines`` without the building of a checked object's dict that nothing reads (its fields'
    locals are what the checks read): an object is built when ``tail``, or an enclosing object's
    dict that is built, names it."""
    read = set(_LOCAL.findall("\n".join(tail)))
    kept: list[str] = []
    for line in reversed(lines):
        built = _BUILD.match(line)
        if built is not None:
            if built.group(1) not in read:
                continue
            read |= set(_LOCAL.findall(line))
        kept.append(line)
    return kept[::-1]


_NONES = re.compile(r"\s+(?:f\d+(?:_\d+)* = )+None$")
_READ = re.compile(r"(\s+)(f\d+(?:_\d+)*) = (?:d|f\d+(?:_\d+)*)\.f\d+$")


def _unread_fields_unread(lines: list[str], tail: list[str]) -> list[str]:
    """The typed ``lines`` without reading a struct field that nothing uses (the decoder checked it
    already), and without the ``if`` blocks that leaves empty (which may leave more unread)."""
    while True:
        read = set(_LOCAL.findall("\n".join(tail)))
        kept: list[str] = []
        for line in reversed(lines):
            plain = _READ.match(line)
            if plain is not None and plain.group(2) not in read:
                continue
            if _NONES.match(line) and not read & set(_LOCAL.findall(line)):
                continue  # the nulls of an object's fields nothing reads
            read |= set(_LOCAL.findall(line.split(" = ", 1)[1] if plain is not None else line))
            kept.append(line)
        kept.reverse()
        indent = [len(line) - len(line.lstrip()) for line in kept]
        kept = [
            line
            for n, line in enumerate(kept)
            if not line.endswith(":") or (n + 1 < len(kept) and indent[n + 1] > indent[n])
        ]
        if kept == lines:
            return kept
        lines = kept


def _scalar_test(kind: str, v: str) -> str | None:
    """An expression true when ``v`` (not None) is not a value the reference accepts unchanged as a
    ``kind``; None when ``kind`` is not a scalar."""
    if kind in INTEGER_RANGES:
        low, high = INTEGER_RANGES[kind]
        return f"type({v}) is not int_type or not {low} <= {v} <= {high}"
    return {
        "string": f"type({v}) is not str_type",
        "double": f"type({v}) is not float_type or not isfinite({v})",
        "boolean": f"type({v}) is not bool_type",
    }.get(kind)


def _value_lines(  # noqa: PLR0917 - the generator's shared state, named at the call sites
    kind: FieldType,
    v: str,
    ind: str,
    env: dict[str, Any],
    inner: dict[tuple[str, ...], str],
    path: tuple[str, ...],
) -> list[str]:
    """Lines leaving in ``v`` the value the reference's check (:func:`check_value`) gives for it, or
    returning None where that check would refuse it or convert it.

    Scalars, arrays and maps of scalars, and objects of these are checked inline (an object becomes
    the dict the reference builds: every declared field, in order; each field's value is a local,
    recorded in ``inner`` under its path). Anything else goes through the reference's check."""
    test = _scalar_test(kind.kind, v)
    if test is not None:
        return [f"{ind}if {v} is not None and ({test}):", f"{ind}    return None"]
    element = _scalar_test(kind.element.kind, "x") if kind.element is not None else None
    if kind.kind in ("array", "map") and element is not None:
        container, items = ("list_type", v) if kind.kind == "array" else ("dict_type", f"{v}.values()")
        return [
            f"{ind}if {v} is not None:",
            f"{ind}    if type({v}) is not {container}:",
            f"{ind}        return None",
            f"{ind}    for x in {items}:",
            f"{ind}        if x is not None and ({element}):",
            f"{ind}            return None",
        ]
    if kind.kind == "object":
        subs = [(f, f"{v}_{n}") for n, f in enumerate(kind.fields)]
        lines = [f"{ind}{' = '.join(sub for _, sub in subs)} = None"] if subs else []
        lines += [
            f"{ind}if {v} is not None:",
            f"{ind}    if type({v}) is not dict_type:",
            f"{ind}        return None",
        ]
        for field, sub in subs:
            inner[(*path, field.name)] = sub
            lines.append(f"{ind}    {sub} = {v}.get({field.name!r})")
            lines += _value_lines(field.type, sub, ind + "    ", env, inner, (*path, field.name))
        built = ", ".join(f"{field.name!r}: {sub}" for field, sub in subs)
        return [*lines, f"{ind}    {v} = {{{built}}}"]
    checked = f"T{len([k for k in env if k.startswith('T')])}"
    env[checked] = kind
    return [
        f"{ind}if {v} is not None:",
        f"{ind}    problem = []",
        f"{ind}    {v} = check({checked}, {v}, '', problem)",
        f"{ind}    if problem:",
        f"{ind}        return None",
    ]


def _table_lines(  # noqa: PLR0917 - the generator's shared state, named at the one call site
    t: int,
    table: WideTable,
    period_ms: int,
    topic: Topic,
    env: dict[str, Any],
    local: dict[str, str],
    filters: _Filters,
    keyed: dict[int, int],
) -> tuple[list[str], list[str]] | None:
    """(checks, applies) folding the event into table number ``t`` (its state rows ``R<t>`` and
    empty row ``E<t>`` are bound later); None if it cannot be compiled. ``keyed`` holds the tables
    before it by period: a table of the same period reuses their key."""
    key, et = local[topic.key], local[topic.event_time]
    index = {c.name: n for n, c in enumerate(table.columns)}
    mappings = topic.mappings_for(table.name)
    sums = [index[m.column] for m in mappings if m.agg == "sum"]
    if len(sums) != len(set(sums)):
        return None  # the reference carries a pending total between them
    kept = [index[m.column] for m in mappings if m.agg in ("min", "max", "first", "last")]
    if len(kept) != len(set(kept)):
        return None  # the reference compares with the pending state of the same column
    s = f"s{t}"
    same = keyed.get(int(period_ms))  # an earlier table's key of the same period: the same tuple
    key_line = (
        f"    k{t} = k{same}" if same is not None else f"    k{t} = ({key}, {et} - {et} % {int(period_ms)})"
    )
    keyed.setdefault(int(period_ms), t)
    checks = [key_line, f"    {s} = R{t}.get(k{t})"]
    applies = [f"    if {s} is None:", f"        {s} = R{t}[k{t}] = list(E{t})"]
    for r, m in enumerate(mappings):
        col = index[m.column]
        p, v = f"p{t}_{r}", f"v{t}_{r}"
        if m.filter is not None:
            checks.append(f"    {p} = {filters.true(m.filter.expr)}")
        if m.agg == "count":  # an int the handler keeps: cannot fail
            applies += (
                [f"    if {p}:", f"        {s}[{col}] += 1"]
                if m.filter is not None
                else [f"    {s}[{col}] += 1"]
            )
            continue
        assert m.field is not None
        getter = filters.ref(m.field)  # a path into an object field: as the reference reads it
        checks.append(
            f"    {v} = {getter} if {p} else None" if m.filter is not None else f"    {v} = {getter}"
        )
        if m.agg == "sum":
            checks += [
                f"    if {v} is not None:",
                f"        c = {s}[{col}] if {s} is not None else None",
                f"        {v} = {v} if c is None else c + {v}",
                f"        if not ({_in_range(topic, m.field, v)}):",
                "            return None",
            ]
            applies += [f"    if {v} is not None:", f"        {s}[{col}] = {v}"]
        else:
            keep_checks, keep_applies = _keep_lines(m.agg, s, col, v, et)
            checks += keep_checks
            applies += keep_applies
    return checks, applies


def _in_range(topic: Topic, path: Path, total: str) -> str:
    """An expression true when the sum ``total`` fits its column, as
    :func:`~widehouse.catalog.semantics.fold.sum_in_range` decides, inline where the field's kind
    tells the total's type (the handler took the value only if it was exactly of that kind)."""
    kind = topic.field(tuple(path)).type.kind
    if kind in INTEGER_RANGES:  # int + int: an int (a float, never here, is refused: the reference decides)
        low, high = INTEGER_RANGES["long"]
        return f"{low} <= {total} <= {high}"
    if kind == "double":  # float + a number: a float
        return f"isfinite({total})"
    return f"in_range({total})"


def _keep_lines(agg: str, s: str, col: int, v: str, et: str) -> tuple[list[str], list[str]]:
    """min / max keep the smaller / larger value; first / last the smaller / larger (time, value).

    The comparison is a check (it runs before any table changes, so whatever it raises leaves the
    state untouched); the apply only stores: ``v`` becomes the value to store, or None to keep."""
    op = "<" if agg in ("min", "first") else ">"
    new = v if agg in ("min", "max") else f"({et}, {v})"
    checks = [
        f"    if {v} is not None:",
        f"        {v} = {new}",
        f"        c = {s}[{col}] if {s} is not None else None",
        f"        if c is not None and not ({v} {op} c):",
        f"            {v} = None",
    ]
    return checks, [f"    if {v} is not None:", f"        {s}[{col}] = {v}"]

"""The catalog's filter language: a small, safe boolean expression over a topic's own fields.

A column mapping may carry ``filter: "result = 'success' and duration_ms >= 1000"``. The text is
parsed into an AST (never pasted into SQL), type-checked against the topic's declared fields, and
then rendered to Spark SQL (:func:`to_spark_sql`) or compiled to a Python predicate
(:func:`compile_predicate`) for the generator's manifest and the reference parser.

Grammar (keywords are case-insensitive)::

    expr      := and_expr ("or" and_expr)*
    and_expr  := not_expr ("and" not_expr)*
    not_expr  := "not" not_expr | primary
    primary   := "(" expr ")"
               | operand (cmp operand | "is" ["not"] "null" | ["not"] "in" "(" literal ("," literal)* ")")
               | field                                -- a boolean field on its own
    operand   := field | literal
    cmp       := "=" | "==" | "!=" | "<>" | "<" | "<=" | ">" | ">="
    field     := name ("." name)*                      -- dotted path into nested objects
    literal   := integer | decimal | 'string' | "string" | true | false

Semantics are SQL's three-valued logic: a comparison with a null field is unknown, ``not unknown``
is unknown, and a row passes only when the whole filter is *true*. Python evaluation implements the
same rules, so the generator's expected values equal what Spark computes.

Strings may hold any printable character except quotes and backslashes (so rendering never needs
escaping); numbers are decimal; arithmetic and functions are deliberately absent.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from widehouse.catalog.types import INT64, NUMERIC

MAX_LENGTH = 2000
MAX_DEPTH = 32
KEYWORDS = frozenset({"and", "or", "not", "in", "is", "null", "true", "false"})
_CMP_OPS = {"=": "=", "==": "=", "!=": "<>", "<>": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">="}

Scalar = int | float | str | bool
Path = tuple[str, ...]


class FilterError(ValueError):
    """A filter that does not parse or does not type-check; the message says where and why."""


# --------------------------------------------------------------------------------------------- AST
@dataclass(frozen=True)
class FieldRef:
    path: Path


@dataclass(frozen=True)
class Literal:
    value: Scalar


@dataclass(frozen=True)
class Compare:
    op: str  # one of = <> < <= > >=
    left: FieldRef | Literal
    right: FieldRef | Literal


@dataclass(frozen=True)
class InList:
    operand: FieldRef
    values: tuple[Literal, ...]
    negated: bool = False


@dataclass(frozen=True)
class IsNull:
    operand: FieldRef
    negated: bool = False


@dataclass(frozen=True)
class Truthy:
    operand: FieldRef


@dataclass(frozen=True)
class And:
    items: tuple[Expr, ...]


@dataclass(frozen=True)
class Or:
    items: tuple[Expr, ...]


@dataclass(frozen=True)
class Not:
    item: Expr


Expr = Compare | InList | IsNull | Truthy | And | Or | Not


@dataclass(frozen=True)
class Filter:
    """A parsed, type-checked filter: the source text, the AST and the fields it reads."""

    text: str
    expr: Expr
    fields: frozenset[Path]

    def to_spark_sql(self, ref: Callable[[Path], str] | None = None) -> str:
        return to_spark_sql(self.expr, ref)

    def predicate(self) -> Callable[[Mapping[str, Any]], bool]:
        return compile_predicate(self.expr)


# ---------------------------------------------------------------------------------------- tokenizer
_TOKEN_RE = re.compile(
    r"""\s*(?:
        (?P<number>-?(?:\d+\.\d+|\d+)(?:[eE][+-]?\d+)?)
      | (?P<string>'[^'"\\\x00-\x1f\x7f]*'|"[^'"\\\x00-\x1f\x7f]*")
      | (?P<name>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
      | (?P<op>==|!=|<>|<=|>=|=|<|>|\(|\)|,)
    )""",
    re.VERBOSE,
)


@dataclass(frozen=True)
class _Token:
    kind: str  # number, string, name, keyword, op, end
    text: str
    pos: int


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos = 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            break
        match = _TOKEN_RE.match(text, pos)
        if not match or match.end() == pos:
            if text[pos] in "'\"":
                raise FilterError(
                    f"unterminated string, or a quote, backslash or control character inside one, at "
                    f"position {pos}: {text[pos : pos + 20]!r}"
                )
            raise FilterError(f"unexpected {text[pos : pos + 20]!r} at position {pos}")
        kind = match.lastgroup or ""
        value = match.group(kind)
        if kind == "name" and value.lower() in KEYWORDS:
            tokens.append(_Token("keyword", value.lower(), match.start(kind)))
        else:
            tokens.append(_Token(kind, value, match.start(kind)))
        pos = match.end()
    tokens.append(_Token("end", "", len(text)))
    return tokens


# ------------------------------------------------------------------------------------------- parser
class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokenize(text)
        self.index = 0
        self.depth = 0

    @property
    def peek(self) -> _Token:
        return self.tokens[self.index]

    def take(self) -> _Token:
        token = self.tokens[self.index]
        self.index += 1
        return token

    def accept_keyword(self, word: str) -> bool:
        if self.peek.kind == "keyword" and self.peek.text == word:
            self.index += 1
            return True
        return False

    def expect_op(self, op: str) -> None:
        token = self.take()
        if token.kind != "op" or token.text != op:
            raise FilterError(f"expected {op!r} at position {token.pos}, found {token.text or 'the end'!r}")

    def parse(self) -> Expr:
        if not self.text.strip():
            raise FilterError("empty filter")
        expr = self.expr()
        if self.peek.kind != "end":
            raise FilterError(f"unexpected {self.peek.text!r} at position {self.peek.pos}")
        return expr

    def expr(self) -> Expr:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise FilterError(f"filter nests deeper than {MAX_DEPTH} levels")
        items = [self.and_expr()]
        while self.accept_keyword("or"):
            items.append(self.and_expr())
        self.depth -= 1
        return items[0] if len(items) == 1 else Or(tuple(items))

    def and_expr(self) -> Expr:
        items = [self.not_expr()]
        while self.accept_keyword("and"):
            items.append(self.not_expr())
        return items[0] if len(items) == 1 else And(tuple(items))

    def not_expr(self) -> Expr:
        if self.accept_keyword("not"):
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise FilterError(f"filter nests deeper than {MAX_DEPTH} levels")
            inner = self.not_expr()
            self.depth -= 1
            return Not(inner)
        return self.primary()

    def primary(self) -> Expr:
        token = self.peek
        if token.kind == "op" and token.text == "(":
            self.take()
            inner = self.expr()
            self.expect_op(")")
            return inner
        left = self.operand()
        nxt = self.peek
        if nxt.kind == "op" and nxt.text in _CMP_OPS:
            self.take()
            right = self.operand()
            return Compare(_CMP_OPS[nxt.text], left, right)
        if nxt.kind == "keyword" and nxt.text == "is":
            self.take()
            negated = self.accept_keyword("not")
            if not self.accept_keyword("null"):
                raise FilterError(f"expected 'null' after 'is' at position {self.peek.pos}")
            return IsNull(self._field(left, "is null"), negated)
        if nxt.kind == "keyword" and nxt.text in {"in", "not"}:
            negated = self.accept_keyword("not")
            if not self.accept_keyword("in"):
                raise FilterError(f"expected 'in' after 'not' at position {self.peek.pos}")
            return InList(self._field(left, "in"), self.literal_list(), negated)
        if isinstance(left, FieldRef):
            return Truthy(left)
        raise FilterError(f"a literal on its own is not a condition (at position {token.pos})")

    def _field(self, operand: FieldRef | Literal, what: str) -> FieldRef:
        if not isinstance(operand, FieldRef):
            raise FilterError(f"'{what}' needs a field on its left, not a literal")
        return operand

    def literal_list(self) -> tuple[Literal, ...]:
        self.expect_op("(")
        values = [self.literal()]
        while self.peek.kind == "op" and self.peek.text == ",":
            self.take()
            values.append(self.literal())
        self.expect_op(")")
        return tuple(values)

    def operand(self) -> FieldRef | Literal:
        token = self.peek
        if token.kind == "name":
            self.take()
            return FieldRef(tuple(token.text.split(".")))
        return self.literal()

    def literal(self) -> Literal:
        token = self.take()
        if token.kind == "number":
            return Literal(_number(token))
        if token.kind == "string":
            return Literal(token.text[1:-1])
        if token.kind == "keyword" and token.text in {"true", "false"}:
            return Literal(token.text == "true")
        if token.kind == "keyword" and token.text == "null":
            raise FilterError(f"compare with null using 'is null' / 'is not null' (position {token.pos})")
        if token.kind == "keyword":
            raise FilterError(
                f"expected a field or a literal at position {token.pos}, found the keyword {token.text!r} "
                "(fields named like keywords cannot be used in filters)"
            )
        raise FilterError(
            f"expected a field or a literal at position {token.pos}, found {token.text or 'the end'!r}"
        )


def _number(token: _Token) -> int | float:
    text = token.text
    if re.fullmatch(r"-?\d+", text):
        value = int(text)
        if not INT64[0] <= value <= INT64[1]:
            raise FilterError(f"integer {text} at position {token.pos} does not fit in 64 bits")
        return value
    number = float(text)
    if not math.isfinite(number):
        raise FilterError(f"number {text} at position {token.pos} is out of range")
    return number


# ----------------------------------------------------------------------------------- type checking
def parse_filter(text: str, resolve: Callable[[Path], str]) -> Filter:
    """Parse and type-check ``text``. ``resolve(path)`` returns the scalar type of a field path or raises
    :class:`FilterError` naming what is wrong (unknown field, not a scalar)."""
    if not isinstance(text, str):
        raise FilterError(f"a filter must be a string, got {type(text).__name__}")
    if len(text) > MAX_LENGTH:
        raise FilterError(f"filter longer than {MAX_LENGTH} characters")
    expr = _Parser(text).parse()
    fields: set[Path] = set()
    _check(expr, resolve, fields)
    return Filter(text=text, expr=expr, fields=frozenset(fields))


def _literal_type(value: Scalar) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "long"
    if isinstance(value, float):
        return "double"
    return "string"


def _family(type_name: str) -> str:
    if type_name in NUMERIC or type_name == "timestamp-ms":
        return "number"
    return type_name


def _operand_type(operand: FieldRef | Literal, resolve: Callable[[Path], str], fields: set[Path]) -> str:
    if isinstance(operand, FieldRef):
        fields.add(operand.path)
        return resolve(operand.path)
    return _literal_type(operand.value)


def _name(operand: FieldRef | Literal) -> str:
    return ".".join(operand.path) if isinstance(operand, FieldRef) else repr(operand.value)


def _check(expr: Expr, resolve: Callable[[Path], str], fields: set[Path]) -> None:  # noqa: PLR0912 - per node kind
    if isinstance(expr, And | Or):
        for item in expr.items:
            _check(item, resolve, fields)
    elif isinstance(expr, Not):
        _check(expr.item, resolve, fields)
    elif isinstance(expr, Compare):
        if isinstance(expr.left, Literal) and isinstance(expr.right, Literal):
            raise FilterError(f"{_name(expr.left)} {expr.op} {_name(expr.right)} compares two literals")
        left = _operand_type(expr.left, resolve, fields)
        right = _operand_type(expr.right, resolve, fields)
        if _family(left) != _family(right):
            raise FilterError(
                f"cannot compare {_name(expr.left)} ({left}) with {_name(expr.right)} ({right})"
            )
        if left == "boolean" and expr.op not in {"=", "<>"}:
            raise FilterError(f"booleans compare only with = and != ({_name(expr.left)} {expr.op} ...)")
    elif isinstance(expr, InList):
        kind = _operand_type(expr.operand, resolve, fields)
        for literal in expr.values:
            if _family(_literal_type(literal.value)) != _family(kind):
                raise FilterError(
                    f"{_name(expr.operand)} is {kind} but the list has {literal.value!r} "
                    f"({_literal_type(literal.value)})"
                )
    elif isinstance(expr, IsNull):
        _operand_type(expr.operand, resolve, fields)
    elif isinstance(expr, Truthy):
        kind = _operand_type(expr.operand, resolve, fields)
        if kind != "boolean":
            raise FilterError(
                f"{_name(expr.operand)} is {kind}, not boolean: compare it with something "
                f"(e.g. {_name(expr.operand)} > 0)"
            )


# ----------------------------------------------------------------------------------- Spark SQL
def backtick_path(path: Path) -> str:
    """``gift.price`` -> ``\\`gift\\`.\\`price\\``` (identifiers were validated by the catalog)."""
    return ".".join(f"`{part}`" for part in path)


def spark_literal(value: Scalar) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value) if -(2**31) <= value < 2**31 else f"{value}L"
    if isinstance(value, float):
        return f"{value!r}D"
    # the tokenizer admits no quote, backslash or control character inside a string
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def to_spark_sql(expr: Expr, ref: Callable[[Path], str] | None = None) -> str:
    """Render as a Spark SQL boolean expression. ``ref`` maps a field path to a column expression
    (default: backticked path, e.g. for a DataFrame whose columns are the topic's fields)."""
    column = ref or backtick_path

    def operand(node: FieldRef | Literal) -> str:
        return column(node.path) if isinstance(node, FieldRef) else spark_literal(node.value)

    def render(node: Expr) -> str:  # noqa: PLR0911 - one return per node kind
        if isinstance(node, And):
            return "(" + " AND ".join(render(i) for i in node.items) + ")"
        if isinstance(node, Or):
            return "(" + " OR ".join(render(i) for i in node.items) + ")"
        if isinstance(node, Not):
            return f"(NOT {render(node.item)})"
        if isinstance(node, Compare):
            return f"({operand(node.left)} {node.op} {operand(node.right)})"
        if isinstance(node, InList):
            values = ", ".join(spark_literal(v.value) for v in node.values)
            negation = "NOT " if node.negated else ""
            return f"({column(node.operand.path)} {negation}IN ({values}))"
        if isinstance(node, IsNull):
            return f"({column(node.operand.path)} IS {'NOT ' if node.negated else ''}NULL)"
        return f"({column(node.operand.path)} = true)"

    return render(expr)


# -------------------------------------------------------------------------------- Python evaluation
Tri = bool | None  # SQL three-valued logic: True, False, or None (unknown)


def get_path(row: Mapping[str, Any], path: Path) -> Any:
    """The value at a dotted path of a parsed event (None when any step is missing or null)."""
    value: Any = row
    for part in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


_PY_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "=": lambda a, b: bool(a == b),
    "<>": lambda a, b: bool(a != b),
    "<": lambda a, b: bool(a < b),
    "<=": lambda a, b: bool(a <= b),
    ">": lambda a, b: bool(a > b),
    ">=": lambda a, b: bool(a >= b),
}


def _compile(expr: Expr) -> Callable[[Mapping[str, Any]], Tri]:
    if isinstance(expr, And | Or):
        # three-valued AND / OR: the first operand equal to `decisive` (False for AND, True for OR)
        # decides; otherwise any unknown operand makes the result unknown
        parts = [_compile(i) for i in expr.items]
        decisive = isinstance(expr, Or)

        def junction(row: Mapping[str, Any]) -> Tri:
            result: Tri = not decisive
            for part in parts:
                value = part(row)
                if value is decisive:
                    return decisive
                if value is None:
                    result = None
            return result

        return junction
    if isinstance(expr, Not):
        inner = _compile(expr.item)

        def not_(row: Mapping[str, Any]) -> Tri:
            value = inner(row)
            return None if value is None else not value

        return not_
    if isinstance(expr, Compare):
        op = _PY_OPS[expr.op]
        left, right = _operand_getter(expr.left), _operand_getter(expr.right)

        def compare(row: Mapping[str, Any]) -> Tri:
            a, b = left(row), right(row)
            if a is None or b is None:
                return None
            return op(a, b)

        return compare
    if isinstance(expr, InList):
        path, negated = expr.operand.path, expr.negated
        values = [v.value for v in expr.values]

        def in_list(row: Mapping[str, Any]) -> Tri:
            value = get_path(row, path)
            if value is None:
                return None
            found = any(value == v for v in values)
            return (not found) if negated else found

        return in_list
    if isinstance(expr, IsNull):
        path, negated = expr.operand.path, expr.negated
        return lambda row: (get_path(row, path) is None) != negated
    path = expr.operand.path

    def truthy(row: Mapping[str, Any]) -> Tri:
        value = get_path(row, path)
        return None if value is None else bool(value)

    return truthy


def _operand_getter(node: FieldRef | Literal) -> Callable[[Mapping[str, Any]], Any]:
    if isinstance(node, FieldRef):
        path = node.path
        return lambda row: get_path(row, path)
    value = node.value
    return lambda _row: value


def compile_predicate(expr: Expr) -> Callable[[Mapping[str, Any]], bool]:
    """A Python predicate with SQL semantics: True only when the filter is true (not unknown)."""
    tri = _compile(expr)
    return lambda row: tri(row) is True

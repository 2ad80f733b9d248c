"""What a request may run: statements that reach the host (files, URLs, programs, other servers) are
refused before they run, and ``GET`` runs read-only statements only.

A ClickHouse server confines ``file()`` to ``user_files_path`` and checks grants; chDB runs every
statement as a user with every grant (``SOURCES``, ``SYSTEM``, ``BACKUP``...) and no setting turns
that off short of ``readonly``. So the service asks the engine's own parser, on the handle that will
run the statement, before running it:

1. ``formatQuerySingleLine`` parses the text: a syntax error or a second statement is refused (chDB
   runs ``;``-separated statements one after another; ClickHouse's HTTP interface refuses them);
2. ``EXPLAIN AST`` gives the tree: every function, table function, table engine and dictionary
   source is named there, whatever the spelling (case, quoting, comments, whitespace), so a name
   that reaches the host (``file``, ``url``, ``s3``, ``remote``, ``executable``, every other table
   function and engine not in :data:`SAFE_TABLE_FUNCTIONS` / :data:`SAFE_ENGINES`) is refused
   anywhere in the tree; ``INTO OUTFILE``, ``FROM INFILE``, ``SYSTEM``, ``BACKUP``/``RESTORE`` and
   ``ATTACH`` are refused by statement shape;
3. the data of ``INSERT ... VALUES`` is not in the tree (the executor streams it into the Values
   format, so a ``;`` in it cannot start a second statement), and the Values format evaluates
   expressions (``VALUES (file('/etc/passwd'))`` reads the file): :meth:`Guard.check_values` has
   the engine render the rows as a ``SELECT`` list and refuses calls of refused names in that;
4. settings that name host files (``format_schema``, ``format_template_*``) are refused, and the
   service's caps (``max_execution_time``, ``max_memory_usage``) may be lowered but not lifted.

Refusals are ClickHouse's ``ACCESS_DENIED`` (497, HTTP 403) naming what was refused; a write by
``GET`` is ``READONLY`` (164, HTTP 400), as ClickHouse answers it.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from widehouse.clickhouse.server.protocol import QueryError

SAFE_TABLE_FUNCTIONS = frozenset(
    {
        "numbers", "numbers_mt", "zeros", "zeros_mt", "generate_series", "generateseries", "primes",
        "values", "sqlstandardvalues", "null", "merge", "view", "viewifpermitted", "generaterandom",
        "format", "loop", "dictionary", "mergetreeindex", "mergetreeprojection", "timeseriesdata",
        "timeseriestags", "timeseriesmetrics",
    }
)  # fmt: skip
"""Table functions that read only what the statement or the warehouse holds (lower case). Not
``input()``: the data after its ``FORMAT`` clause is not parsed as SQL, so chDB would run a second
statement after a ``;`` there unchecked."""

SAFE_ENGINES = frozenset(
    {
        "mergetree", "replacingmergetree", "summingmergetree", "aggregatingmergetree",
        "collapsingmergetree", "versionedcollapsingmergetree", "graphitemergetree", "coalescingmergetree",
        "memory", "log", "tinylog", "stripelog", "null", "set", "join", "buffer", "view",
        "materializedview", "merge", "dictionary", "generaterandom", "alias", "loop", "timeseries",
    }
)  # fmt: skip
"""Table engines whose data lives in the warehouse or in memory (lower case)."""

SAFE_DICTIONARY_SOURCES = frozenset({"clickhouse", "null"})
ALWAYS_REFUSED = frozenset({"file", "url", "s3", "remote", "remotesecure", "executable", "executablepool"})
"""Refused even if the engine's catalogues of table functions and engines left them out."""

REFUSED_SETTINGS = frozenset({"format_schema", "format_template_resultset", "format_template_row"})
"""Settings that name files on the host."""

CACHED_LENGTH = 4096
CACHED_VERDICTS = 1024
"""Verdicts on statements up to ``CACHED_LENGTH`` bytes are kept, the last ``CACHED_VERDICTS`` of them."""
_READ_KINDS = ("Select", "Show", "Describe", "Exists", "Explain")
_STATE_KINDS = frozenset({"Set", "UseQuery"})
_OUTPUT_KINDS = (*_READ_KINDS, "Check")
_REFUSED_KINDS = {
    "SYSTEM": "SYSTEM statements",
    "BackupQuery": "BACKUP and RESTORE",
    "AttachQuery": "ATTACH of tables and databases",
}
_FORMAT_AT_END = re.compile(r"\sFORMAT\s+\w+\s*$", re.IGNORECASE)
_WORD = re.compile(r"[a-z_][a-z0-9_]*")
_CALL = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\(")
_FUNCTION_KINDS = frozenset({"Function", "FunctionWithKeyValueArguments"})
_LINE = re.compile(r"^( *)(\S+)(?: +(\S+))?")
_CHILDREN = re.compile(r" \(children \d+\)$")
_SETTING_ASSIGNMENT = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*=\s*('?)([^,\s']*)")


@dataclass(frozen=True)
class Node:
    depth: int
    kind: str
    name: str
    parent: str
    first: bool
    """Whether the node is its parent's first child (a table's engine is its Storage's first)."""


@dataclass(frozen=True)
class Verdict:
    """An allowed statement: its root kind (``SelectWithUnionQuery``, ``CreateQuery``...) and whether
    it is an INSERT whose data follows it (``VALUES`` or ``FORMAT``: the caller must stream that data
    into the engine's input format, never pass it on as SQL)."""

    kind: str
    inline_data: bool = False

    @property
    def read_only(self) -> bool:
        return self.kind.startswith(_READ_KINDS) or self.kind in _STATE_KINDS


class Guard:
    """Checks statements against the engine's catalogues of table functions and engines."""

    def __init__(self, catalog: Iterable[str], caps: Mapping[str, int]) -> None:
        """``catalog``: the engine's table function and table engine names; ``caps``: setting -> max."""
        known = {name.lower() for name in catalog}
        self.refused = frozenset((known - SAFE_TABLE_FUNCTIONS - SAFE_ENGINES) | ALWAYS_REFUSED)
        words = "|".join(sorted((re.escape(name) for name in self.refused), key=len, reverse=True))
        self._mentions = re.compile(rf"(?<![A-Za-z0-9_])(?:{words})(?![A-Za-z0-9_])", re.IGNORECASE)
        self.caps = dict(caps)
        self._verdicts: OrderedDict[tuple[bytes, str], Verdict] = OrderedDict()
        self._lock = threading.Lock()

    # -- settings ------------------------------------------------------------------------------------
    def check_settings(self, settings: Mapping[str, str]) -> None:
        """Refuse host-file settings and values above the caps (URL parameters or ``SET``/``SETTINGS``)."""
        for name, value in settings.items():
            lowered = name.lower()
            if lowered in REFUSED_SETTINGS:
                raise denied(f"setting {name}, which names a file on the host")
            cap = self.caps.get(lowered)
            if cap is None:
                continue
            try:
                number = int(float(value))
            except ValueError:
                continue  # the engine rejects the value itself
            if number <= 0 or number > cap:
                raise QueryError.of(
                    "SETTING_CONSTRAINT_VIOLATION",
                    f"Setting {name} should be in 1..{cap} on this service, got {value!r}",
                )

    # -- statements ----------------------------------------------------------------------------------
    def check(self, handle: _Runner, sql: bytes, params: Mapping[str, str], method: str) -> Verdict:
        """Parse ``sql`` with the engine on ``handle`` and refuse it if it may not run; see the module.

        The verdict on a short statement is remembered (it depends on the text and method only, not on
        parameter values or the database), so the repeated ``INSERT INTO t (...) FORMAT Native`` of a
        stream sink costs the two parsing round trips once.
        """
        key = (sql, method)
        if len(sql) <= CACHED_LENGTH:
            with self._lock:
                cached = self._verdicts.get(key)
            if cached is not None:
                return cached
        verdict = self._check(handle, sql, params, method)
        if len(sql) <= CACHED_LENGTH:
            with self._lock:
                self._verdicts[key] = verdict
                while len(self._verdicts) > CACHED_VERDICTS:
                    self._verdicts.popitem(last=False)
        return verdict

    def _check(self, handle: _Runner, sql: bytes, params: Mapping[str, str], method: str) -> Verdict:
        formatted = self._format(handle, sql)
        assignments = _SETTING_ASSIGNMENT.finditer(formatted)
        self.check_settings({m.group(1): m.group(3) for m in assignments if _is_setting(m.group(1))})
        # the formatter's output is one statement by construction; the raw text might hide a second
        # one after inline INSERT data, which EXPLAIN (chDB runs ;-separated statements) would run
        tree = handle.query(b"EXPLAIN AST " + formatted.encode(), "TabSeparatedRaw", params)
        dump = tree.data.decode("utf-8", "replace")
        nodes = parse_ast(dump)
        if not nodes:
            raise QueryError.of("SYNTAX_ERROR", "Empty query")
        root = nodes[0]
        verdict = Verdict(root.kind, root.kind == "InsertQuery" and bool(_FORMAT_AT_END.search(formatted)))
        if method == "GET" and not verdict.read_only:
            raise QueryError.of(
                "READONLY",
                "Cannot execute query in readonly mode. For queries over HTTP, method GET implies readonly. "
                "You should use method POST for modifying queries",
            )
        refused_kind = _REFUSED_KINDS.get(root.kind)
        if refused_kind is not None:
            raise denied(refused_kind)
        self._check_nodes(nodes)
        return verdict

    def check_values(self, handle: _Runner, data: bytes) -> None:
        """Refuse ``INSERT ... VALUES`` data that calls a refused function (the Values format runs
        expressions: ``VALUES (file('/etc/passwd'))`` would read the file).

        The engine formats the rows as a ``SELECT`` list: its output spells every name plainly (no
        comments, escapes or quoting tricks), and the calls in it are checked. Rows that are not valid
        SQL (Values also takes ``{'k': 1}`` maps, rows without commas) pass only if no refused name
        and no quoted identifier appears in them at all.
        """
        raw = data.decode("utf-8", "replace")
        # a call is spelt with its name as a word unless the name is a quoted identifier (which may
        # hold escapes): without quotes and without any refused name among the words, no call
        if "`" not in raw and '"' not in raw and not set(_WORD.findall(raw.lower())) & self.refused:
            return
        try:
            limit = b" SETTINGS max_query_size = %d" % (2 * len(data) + 1024)  # the rows are not SQL text
            canonical = self._format(handle, b"SELECT " + data, limit)
        except QueryError:
            if self._mentions.search(raw) or "`" in raw or '"' in raw:
                raise denied("INSERT data that cannot be checked (it names refused functions)") from None
            return
        # the rendering writes every call as name( : a quick look for refused ones before the exact scan
        if not {m.group(1).lower() for m in _CALL.finditer(canonical)} & self.refused:
            return
        for name in called_names(canonical):
            if name.lower() in self.refused:
                raise denied(f"{name}() in INSERT data")

    def _format(self, handle: _Runner, sql: bytes, settings: bytes = b"") -> str:
        """The engine's one-line rendering of ``sql``; a syntax error or a second statement raises."""
        return handle.query(
            b"SELECT formatQuerySingleLine({q:String})" + settings,
            "TabSeparatedRaw",
            {"q": _tsv_escape(sql.decode("utf-8", "replace"))},
        ).data.decode("utf-8", "replace")

    def _check_nodes(self, nodes: list[Node]) -> None:
        for node in nodes:
            if node.depth == 1 and nodes[0].kind == "InsertQuery" and node.kind == "Literal":
                raise denied("FROM INFILE")
            if node.kind == "Literal" and node.parent.startswith(_OUTPUT_KINDS) and node.depth == 1:
                raise denied("INTO OUTFILE")
            if node.kind not in _FUNCTION_KINDS:
                continue
            name = node.name.lower()
            if name in self.refused:
                raise denied(f"{_what(node)} {node.name}")
            if node.parent == "TableExpression" and name not in SAFE_TABLE_FUNCTIONS:
                raise denied(f"table function {node.name}")
            if node.parent == "Storage" and node.first and name not in SAFE_ENGINES:
                raise denied(f"table engine {node.name}")
            if node.parent == "Dictionary" and name not in SAFE_DICTIONARY_SOURCES:
                raise denied(f"dictionary source {node.name}")


class _Result(Protocol):
    @property
    def data(self) -> bytes: ...


class _Runner(Protocol):
    """What :meth:`Guard.check` needs of an engine handle (see :class:`engine.Handle`)."""

    def query(self, sql: bytes, fmt: str, params: Mapping[str, str]) -> _Result: ...


def denied(what: str) -> QueryError:
    return QueryError.of(
        "ACCESS_DENIED", f"{what} is not allowed on this service: it reaches outside the warehouse"
    )


def _what(node: Node) -> str:
    if node.parent == "Storage":
        return "table engine"
    if node.parent == "Dictionary":
        return "dictionary source"
    if node.parent in ("TableExpression", "InsertQuery", "CreateQuery"):
        return "table function"
    return "function"


def _is_setting(name: str) -> bool:
    lowered = name.lower()
    return lowered in REFUSED_SETTINGS or lowered in ("max_execution_time", "max_memory_usage")


def parse_ast(dump: str) -> list[Node]:
    """The nodes of an ``EXPLAIN AST`` dump, each with its depth, kind, name and parent's kind.

    A line deeper than one below the line before it cannot come from the engine's dump (an
    identifier with a line break in it can forge lines): the statement is refused.
    """
    nodes: list[Node] = []
    stack: list[str] = []
    seen: list[int] = [0]  # children met so far at each depth
    for line in dump.splitlines():
        if not line.strip():
            continue
        match = _LINE.match(_CHILDREN.sub("", line))
        if match is None:
            continue
        depth = len(match.group(1))
        if depth > len(stack):
            raise denied("a statement whose syntax tree cannot be read (line breaks in names)")
        del stack[depth:]
        del seen[depth + 1 :]
        kind = match.group(2)
        nodes.append(Node(depth, kind, match.group(3) or "", stack[-1] if stack else "", seen[depth] == 0))
        seen[depth] += 1
        stack.append(kind)
        seen.append(0)
    return nodes


def called_names(sql: str) -> list[str]:
    """Names followed by ``(`` outside string literals and comments, in SQL as the engine renders it
    (plain names, ``'...'`` strings with backslash escapes, no comments): the calls it makes."""
    names: list[str] = []
    i, n = 0, len(sql)
    pending: str | None = None
    while i < n:
        char = sql[i]
        if char.isspace():
            i += 1
            continue
        if sql.startswith("--", i) or char == "#":
            end = sql.find("\n", i)
            i = n if end < 0 else end + 1
            continue
        if sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            i = n if end < 0 else end + 2
            continue
        if char == "'":
            i = _quoted_end(sql, i)
            pending = None
            continue
        if char in '`"':
            end = _quoted_end(sql, i)
            pending = sql[i + 1 : end - 1]
            i = end
            continue
        if char.isalpha() or char == "_":
            j = i
            while j < n and (sql[j].isalnum() or sql[j] == "_"):
                j += 1
            pending = sql[i:j]
            i = j
            continue
        if char == "(" and pending is not None:
            names.append(pending)
        pending = None
        i += 1
    return names


def _quoted_end(sql: str, i: int) -> int:
    quote = sql[i]
    j = i + 1
    n = len(sql)
    while j < n:
        if sql[j] == "\\":
            j += 2
            continue
        if sql[j] == quote:
            if j + 1 < n and sql[j + 1] == quote:
                j += 2
                continue
            return j + 1
        j += 1
    return n


def _tsv_escape(text: str) -> str:
    """A query parameter value: parameters are read as escaped TabSeparated values."""
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")

"""Just enough SQL scanning to route a request: its first keyword and where INSERT data starts.

The engine parses SQL itself; the service only needs to know whether a request is an
``INSERT ... FORMAT <name>`` whose data follows the statement (streamed into the engine), a statement
that changes session state (``SET``, ``USE``) or one that returns a result set.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

RESULT_KEYWORDS = frozenset({"SELECT", "WITH", "SHOW", "DESCRIBE", "DESC", "EXISTS", "EXPLAIN", "CHECK", "("})
SESSION_KEYWORDS = frozenset({"SET", "USE"})
_NOT_STREAMED = frozenset({b"VALUES", b"SELECT", b"WITH"})
_TRAILING_FORMAT = re.compile(rb"\bFORMAT\s+(\w+)\s*;?\s*$", re.IGNORECASE)
_WORD = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")
_SPACE = b" \t\r\n\f\v"


@dataclass(frozen=True)
class InsertSplit:
    """An ``INSERT ... FORMAT <fmt>`` statement (without its FORMAT clause) and where its data starts."""

    statement: str
    fmt: str
    data_start: int


NEED_MORE = "need more"
"""The head read so far ends before the statement does."""


def first_keyword(sql: bytes) -> str:
    """The statement's first word in upper case (``(`` for a parenthesised query, ``""`` for none)."""
    i = _skip_space_and_comments(sql, 0)
    match = _WORD.match(sql, i)
    if match:
        return match.group().decode().upper()
    return sql[i : i + 1].decode("latin-1")


def trailing_format(sql: bytes) -> str | None:
    """The output format named by a trailing ``FORMAT <name>`` clause, if any."""
    match = _TRAILING_FORMAT.search(sql[-256:])
    return match.group(1).decode() if match else None


def split_insert(head: bytes, complete: bool) -> InsertSplit | str | None:
    """Where the data of an ``INSERT ... FORMAT`` starts in ``head`` (the SQL read so far).

    Returns None for any other statement (including ``INSERT ... VALUES`` / ``SELECT``), or
    :data:`NEED_MORE` when ``head`` is not ``complete`` and ends inside the statement. Data starts
    after the format name, blanks and at most one line break, as in ClickHouse's INSERT parser.
    """
    start = _skip_space_and_comments(head, 0)
    word = _WORD.match(head, start)
    if not complete and (start >= len(head) or (word is not None and word.end() == len(head))):
        return NEED_MORE
    if word is None or word.group().upper() != b"INSERT":
        return None
    for top in _top_level_words(head, 0):
        name = top.group().upper()
        if name in _NOT_STREAMED:
            return None
        if name == b"FORMAT":
            return _format_clause(head, top.start(), top.end(), complete)
    return None if complete else NEED_MORE


def values_start(sql: bytes) -> int | None:
    """Where the ``VALUES`` keyword of an ``INSERT ... VALUES`` is (its data follows), else None."""
    start = _skip_space_and_comments(sql, 0)
    word = _WORD.match(sql, start)
    if word is None or word.group().upper() != b"INSERT":
        return None
    for top in _top_level_words(sql, word.end()):
        name = top.group().upper()
        if name in (b"SELECT", b"WITH", b"FORMAT"):
            return None
        if name == b"VALUES":
            return top.start()
    return None


def _top_level_words(sql: bytes, i: int) -> Iterator[re.Match[bytes]]:
    """The words of ``sql`` from ``i`` on that stand outside parentheses, quotes and comments.

    Ends at the end of ``sql`` or at a quote that is not closed (the caller decides what that means).
    """
    depth, n = 0, len(sql)
    while True:
        i = _skip_space_and_comments(sql, i)
        if i >= n:
            return
        char = sql[i : i + 1]
        if char in (b"'", b'"', b"`"):
            i = _quoted_end(sql, i)
            if i < 0:
                return
            continue
        if char in (b"(", b")"):
            depth += 1 if char == b"(" else -1
            i += 1
            continue
        word = _WORD.match(sql, i)
        if word is None:
            i += 1
            continue
        i = word.end()
        if depth == 0:
            yield word


def _format_clause(head: bytes, keyword_start: int, i: int, complete: bool) -> InsertSplit | str | None:
    n = len(head)
    j = _skip_space_and_comments(head, i)
    fmt = _WORD.match(head, j)
    if fmt is None:
        return NEED_MORE if j >= n and not complete else None
    if fmt.end() == n and not complete:
        return NEED_MORE
    k = fmt.end()
    while k < n and head[k : k + 1] in (b" ", b"\t", b"\f"):
        k += 1
    if k < n and head[k : k + 1] == b"\r":
        k += 1
    if k < n and head[k : k + 1] == b"\n":
        k += 1
    elif k >= n and not complete:
        return NEED_MORE
    statement = head[:keyword_start].decode("utf-8", "replace").strip()
    return InsertSplit(statement=statement, fmt=fmt.group().decode(), data_start=k)


def _skip_space_and_comments(sql: bytes, i: int) -> int:
    n = len(sql)
    while i < n:
        if sql[i] in _SPACE:
            i += 1
        elif sql.startswith(b"--", i) or sql.startswith(b"# ", i) or sql.startswith(b"#!", i):
            end = sql.find(b"\n", i)
            i = n if end < 0 else end + 1
        elif sql.startswith(b"/*", i):
            end = sql.find(b"*/", i + 2)
            i = n if end < 0 else end + 2
        else:
            break
    return i


def _quoted_end(sql: bytes, i: int) -> int:
    """The index after the quoted string or identifier starting at ``i``; -1 if it is not closed."""
    quote = sql[i]
    j = i + 1
    while j < len(sql):
        if sql[j] == 0x5C:  # backslash escape
            j += 2
            continue
        if sql[j] == quote:
            if j + 1 < len(sql) and sql[j + 1] == quote:  # doubled quote
                j += 2
                continue
            return j + 1
        j += 1
    return -1

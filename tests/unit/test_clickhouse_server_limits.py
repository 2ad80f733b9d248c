"""Pure parts of the ClickHouse service's defences: the syntax-tree reader, the Values call scan and
bounded body reading (the service end to end is in tests/integration/test_clickhouse_server.py)."""

from __future__ import annotations

import gzip
import io

import pytest

from widehouse.clickhouse.server.codec import Body, BodyTooLargeError, decoded
from widehouse.clickhouse.server.guard import called_names, parse_ast
from widehouse.clickhouse.server.protocol import QueryError
from widehouse.clickhouse.server.sql import values_start

_CREATE = """CreateQuery t3 (children 3)
 Identifier t3
 Storage definition (children 2)
  Function MergeTree
  Function tuple (children 1)
   ExpressionList
 Literal \\'a comment\\'
"""


def test_the_ast_dump_gives_each_node_its_parent_and_position() -> None:
    nodes = parse_ast(_CREATE)
    assert [(n.depth, n.kind, n.name, n.parent, n.first) for n in nodes] == [
        (0, "CreateQuery", "t3", "", True),
        (1, "Identifier", "t3", "CreateQuery", True),
        (1, "Storage", "definition", "CreateQuery", False),
        (2, "Function", "MergeTree", "Storage", True),
        (2, "Function", "tuple", "Storage", False),
        (3, "ExpressionList", "", "Function", True),
        (1, "Literal", "\\'a", "CreateQuery", False),
    ]


def test_a_forged_line_from_a_name_with_a_line_break_is_refused() -> None:
    dump = "SelectWithUnionQuery (children 1)\n ExpressionList (children 1)\n   Identifier a\n"
    with pytest.raises(QueryError, match="ACCESS_DENIED"):
        parse_ast(dump)


def test_calls_are_found_outside_strings_and_comments() -> None:
    data = "(1, 'file(x)', `file` /* c */ (\"p\")), (2, -- url(\n s3 ('k')), "
    data += "(3, \"remote\"(1), 'it''s', now())"
    assert called_names(data) == ["file", "s3", "remote", "now"]


def test_a_sized_body_is_read_in_bounded_pieces() -> None:
    body = Body(io.BytesIO(b"x" * 3_000_000), 3_000_000, False, 4_000_000)
    pieces = list(body.chunks())
    assert [len(p) for p in pieces] == [1 << 20, 1 << 20, 3_000_000 - (2 << 20)]
    with pytest.raises(ValueError, match="negative"):
        Body(io.BytesIO(b""), -1, False, 1024)


@pytest.mark.parametrize("size_line", [b"zz", b"-5", b"0x10", b"", b"1" * 17])
def test_a_malformed_chunk_size_is_refused_unread(size_line: bytes) -> None:
    body = Body(io.BytesIO(size_line + b"\r\n" + b"y" * 100), None, True, 1024)
    with pytest.raises(QueryError, match="BAD_ARGUMENTS"):
        list(body.chunks())
    assert not body.drain(1 << 20)


def test_a_chunk_larger_than_the_cap_is_refused_before_it_is_read() -> None:
    stream = io.BytesIO(b"400\r\n" + b"y" * 1024 + b"\r\n0\r\n\r\n")
    body = Body(stream, None, True, 1000)
    with pytest.raises(BodyTooLargeError):
        list(body.chunks())
    assert stream.tell() == 5  # only the size line was read


def test_a_chunked_body_is_reassembled() -> None:
    stream = io.BytesIO(b"3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\nTrailer: x\r\n\r\nNEXT")
    body = Body(stream, None, True, 1024)
    assert b"".join(body.chunks()) == b"abcde"
    assert body.finished
    assert stream.read() == b"NEXT"


def test_decompression_stops_at_the_cap_in_bounded_steps() -> None:
    bomb = gzip.compress(bytes(64 << 20), compresslevel=9)
    seen: list[int] = []

    def inflate() -> None:
        seen.extend(len(piece) for piece in decoded(iter([bomb]), "gzip", 4 << 20))

    with pytest.raises(BodyTooLargeError):
        inflate()
    assert sum(seen) <= 4 << 20
    assert max(seen) <= 1 << 20


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (b"INSERT INTO t VALUES (1)", 14),
        (b"insert into t (a, `values`) /* VALUES */ values (1)", 41),
        (b"INSERT INTO t (a) SETTINGS x = 'VALUES' VALUES (1)", 40),
        (b"INSERT INTO t SELECT values FROM x", None),
        (b"INSERT INTO t FORMAT Values (1)", None),
        (b"SELECT 'VALUES'", None),
    ],
)
def test_where_insert_values_data_starts(sql: bytes, expected: int | None) -> None:
    assert values_start(sql) == expected

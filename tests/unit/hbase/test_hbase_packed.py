"""Packed family cells (widehouse.hbase.packed): hand-written bytes, round trips, schema evolution
and the errors that name table and family."""

from __future__ import annotations

import datetime as dt
import zlib

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from widehouse.errors import HBaseError
from widehouse.hbase.packed import FamilyLayout

UTC = dt.UTC
TWO = FamilyLayout("wh_user_daily", "s", (("events", "count"), ("country", "string")))
# the documented fingerprint: CRC-32 of "<column>:<kind>\n" lines
FP_TWO = zlib.crc32(b"events:count\ncountry:string\n").to_bytes(4, "big")


def test_a_cell_by_hand() -> None:
    rows = pa.table({"events": pa.array([3, 12], pa.uint64()), "country": [None, "ID"]})
    cells = TWO.encode(rows).to_pylist()
    assert cells[0] == (
        b"WF\x01\x00" + FP_TWO + b"\x00\x02"  # magic, version 1, flags, fingerprint, n = 2
        + b"\x02"  # null bitmap: column 1 (country) null
        + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x01"  # offsets 0, 1, 1
        + b"3"
    )  # fmt: skip
    assert cells[1] == (
        b"WF\x01\x00" + FP_TWO + b"\x00\x02" + b"\x00"
        + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x02" + b"\x00\x00\x00\x04"
        + b"12ID"
    )  # fmt: skip
    events, country = TWO.decode([*cells, None])
    assert events.to_pylist() == [3, 12, 0]  # a row without the family: counts 0
    assert country.to_pylist() == [None, "ID", None]


def test_empty_string_and_null_differ() -> None:
    one = FamilyLayout("t", "h", (("nickname", "string"),))
    cells = one.encode(pa.table({"nickname": ["", None]})).to_pylist()
    assert one.decode(cells)[0].to_pylist() == ["", None]


ALL = FamilyLayout(
    "t",
    "s",
    (
        ("c", "count"),
        ("l", "long"),
        ("i", "int"),
        ("d", "double"),
        ("s", "string"),
        ("b", "boolean"),
        ("t", "timestamp-ms"),
    ),
)
ROW = st.fixed_dictionaries(
    {
        "c": st.integers(0, 2**63 - 1),
        "l": st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)),
        "i": st.one_of(st.none(), st.integers(-(2**31), 2**31 - 1)),
        "d": st.one_of(st.none(), st.floats(allow_nan=False)),
        "s": st.one_of(st.none(), st.text()),
        "b": st.one_of(st.none(), st.booleans()),
        "t": st.one_of(
            st.none(),
            st.datetimes(dt.datetime(1971, 1, 1), dt.datetime(2200, 1, 1)).map(
                lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000, tzinfo=UTC)
            ),
        ),
    }
)
SCHEMA = pa.schema(
    [
        ("c", pa.uint64()),
        ("l", pa.int64()),
        ("i", pa.int32()),
        ("d", pa.float64()),
        ("s", pa.string()),
        ("b", pa.bool_()),
        ("t", pa.timestamp("ms", tz="UTC")),
    ]
)


@given(st.lists(ROW, max_size=30), st.lists(st.booleans(), max_size=30))
def test_round_trip(rows: list[dict[str, object]], absent: list[bool]) -> None:
    cells: list[bytes | None] = list(ALL.encode(pa.Table.from_pylist(rows, schema=SCHEMA)).to_pylist())
    cells = [None if i < len(absent) and absent[i] else cell for i, cell in enumerate(cells)]
    decoded = ALL.decode(cells)
    for i, row in enumerate(rows):
        got = {name: decoded[j][i].as_py() for j, (name, _) in enumerate(ALL.columns)}
        if cells[i] is None:
            assert got == {"c": 0, "l": None, "i": None, "d": None, "s": None, "b": None, "t": None}
        else:
            assert got == row


def test_columns_added_later_read_old_cells_as_null() -> None:
    old = TWO.encode(pa.table({"events": pa.array([5], pa.uint64()), "country": ["IN"]})).to_pylist()
    grown = FamilyLayout("wh_user_daily", "s", (*TWO.columns, ("logins", "count"), ("last_query", "string")))
    new = grown.encode(
        pa.table(
            {"events": pa.array([1], pa.uint64()), "country": ["VN"], "logins": [2], "last_query": ["x"]}
        )
    ).to_pylist()
    columns = grown.decode([old[0], new[0], None])
    assert [c.to_pylist() for c in columns] == [
        [5, 1, 0],
        ["IN", "VN", None],
        [0, 2, 0],  # a count the old writer did not have: 0
        [None, "x", None],
    ]


def test_a_changed_schema_is_an_error_naming_table_and_family() -> None:
    cell = TWO.encode(pa.table({"events": pa.array([5], pa.uint64()), "country": ["IN"]})).to_pylist()
    retyped = FamilyLayout("wh_user_daily", "s", (("events", "count"), ("country", "long")))
    with pytest.raises(HBaseError, match=r"HBase table wh_user_daily family s: cells of 2 column\(s\)"):
        retyped.decode(cell)
    fewer = FamilyLayout("wh_user_daily", "s", (("events", "count"),))
    with pytest.raises(HBaseError, match=r"wh_user_daily family s: .*first 1 of 1 column"):
        fewer.decode(cell)


def test_other_versions_and_broken_cells_are_errors() -> None:
    cell = TWO.encode(pa.table({"events": pa.array([5], pa.uint64()), "country": ["IN"]})).to_pylist()[0]
    with pytest.raises(HBaseError, match=r"family s: packed cell format version\(s\) \[2\]"):
        TWO.decode([cell[:2] + b"\x02" + cell[3:]])
    with pytest.raises(HBaseError, match=r"family s: a cell of 2 bytes is not a packed row"):
        TWO.decode([b"17"])  # a one-cell-per-column value
    with pytest.raises(HBaseError, match=r"family s: a cell is not a packed row"):
        TWO.decode([b"XX" + cell[2:]])
    with pytest.raises(HBaseError, match=r"value offsets do not fit its length"):
        TWO.decode([cell + b"junk"])
    with pytest.raises(HBaseError, match=r"shorter than its header"):
        TWO.decode([cell[:12]])

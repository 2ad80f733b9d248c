"""How day-table values are stored in HBase cells, and read back into Arrow.

Every value is UTF-8 text, typed by the catalog (no Java ``Bytes.toBytes`` binary, so the HBase
shell, Hive-on-HBase and people can read it):

============== ================================ ==========================
kind           cell text                        Arrow type read back
============== ================================ ==========================
count          decimal integer (``42``)         int64, absent -> 0
long, int      decimal integer (``-7``)         int64 / int32
double         shortest round-trip (``0.1``,    float64
               ``1e+20``, ``inf``, ``nan``)
string         the text itself                  string
boolean        ``true`` / ``false``             bool
timestamp-ms   epoch milliseconds (``17..``)    timestamp[ms, UTC]
============== ================================ ==========================

This is the text of one value. The day tables store a family's values of a row together in one
cell (:mod:`widehouse.hbase.packed`), each value as this text; a null is marked null there. A
count is never null in a final row (``0`` when the stream saw nothing), so an absent count reads
back as 0. Encoding and decoding are vectorised Arrow casts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from widehouse.contracts.types import KIND_TYPES
from widehouse.contracts.types import arrow_type as contract_arrow_type
from widehouse.errors import HBaseError

if TYPE_CHECKING:
    import pyarrow as pa

_CELL_TYPES = {"count": "int64", **{k: t.hbase for k, t in KIND_TYPES.items()}}
KINDS = tuple(_CELL_TYPES)


def arrow_type(kind: str) -> pa.DataType:
    """The Arrow type of a day-table value kind (a catalog kind, or ``count``)."""
    if kind not in _CELL_TYPES:
        raise HBaseError(f"unknown day-table value kind {kind!r}; expected one of {', '.join(KINDS)}")
    return contract_arrow_type(_CELL_TYPES[kind])


def encode_column(values: pa.Array | pa.ChunkedArray, kind: str) -> list[bytes | None]:
    """Cell values of one column (None for a null: no cell)."""
    return encode_text(values, kind).to_pylist()  # type: ignore[no-any-return]


def encode_text(values: pa.Array | pa.ChunkedArray, kind: str) -> pa.Array:
    """One column's values as their cell text: an Arrow binary array, null where the value is null."""
    import pyarrow as pa
    import pyarrow.compute as pc

    arrow_type(kind)  # checks the kind
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if pa.types.is_null(values.type):
        return pa.nulls(len(values), pa.binary())
    if pa.types.is_timestamp(values.type):
        values = pc.cast(values, pa.timestamp("ms", tz="UTC"), safe=False).cast(pa.int64())
    elif pa.types.is_date(values.type):
        raise HBaseError(f"a date column cannot be stored as {kind}")
    if kind == "timestamp-ms" and not pa.types.is_integer(values.type):
        raise HBaseError(f"timestamp-ms values must be timestamps or epoch ms, not {values.type}")
    if not (pa.types.is_binary(values.type) or pa.types.is_large_binary(values.type)):
        if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
            values = pc.cast(values, pa.string())
        values = pc.cast(values, pa.binary())
    return values


def decode_column(cells: list[bytes | None], kind: str, column: str = "?") -> pa.Array:
    """One column read back from cell values (None: no cell) as an Arrow array of the kind's type."""
    import pyarrow as pa

    return decode_text(pa.array(cells, pa.binary()), kind, column)


def decode_text(text: pa.Array, kind: str, column: str = "?") -> pa.Array:
    """One column's cell text (an Arrow binary array, null: no value) as the kind's Arrow type."""
    import pyarrow as pa
    import pyarrow.compute as pc

    target = arrow_type(kind)
    try:
        if pa.types.is_large_binary(text.type):
            text = pc.cast(text, pa.binary())
        text = pc.cast(text, pa.string())
        if kind == "string":
            return text
        if kind == "timestamp-ms":
            return pc.cast(pc.cast(text, pa.int64()), target)
        decoded = pc.cast(text, target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise HBaseError(f"HBase cells of column {column} are not valid {kind} text: {exc}") from exc
    if kind == "count":
        decoded = pc.fill_null(decoded, 0)
    return decoded

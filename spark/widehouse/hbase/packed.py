"""A family of a day row packed into one HBase cell (format 1), and read back into Arrow.

A day row is two cells: ``s:0`` (the stream's columns, written by the hourly refresh and the daily
merge) and ``h:0`` (the offline columns, written by the daily job). Each cell holds all of its
family's columns for the row, as Apache Phoenix's ``SINGLE_CELL_ARRAY_WITH_OFFSETS`` storage does:
one mutation per row and family instead of one per column (~100), a row still read with one
``get``, and the two families independent (each writer replaces only its own cell). The
qualifier ``0`` cannot be a catalog column name (those start with a letter or ``_``).

Cell layout (all integers big-endian, as HBase's ``Bytes``), ``n`` = columns encoded::

    offset        size          field
    0             2             magic ``WF``
    2             1             format version (1)
    3             1             flags (0; reserved)
    4             4             schema fingerprint: CRC-32 (zlib) of ``"<column>:<kind>\\n"``
                                for the n columns, in order
    8             2             n, columns encoded (uint16)
    10            ceil(n/8)     null bitmap: bit i (byte i // 8, value 1 << (i % 8)) set = column i null
    10+ceil(n/8)  4 * (n + 1)   value offsets, uint32, relative to the value section; value i is
                                ``values[off[i]:off[i + 1]]``, ``off[n]`` = the section's length
    H             off[n]        values: each the typed text of :mod:`widehouse.hbase.codec`
                                (``42``, ``0.1``, ``true``, epoch ms, UTF-8 strings); a null is empty

``H = 10 + ceil(n/8) + 4 (n + 1)``. The columns and kinds are the family's in catalog order
(:class:`~widehouse.hbase.daytable.DayTable`), so a reader built from the catalog decodes a cell.

Schema evolution: columns appended to a family in the catalog later still read old cells (a cell
with fewer columns: the missing ones are null, counts 0), since the fingerprint covers only the
n columns the writer had and the reader compares it with its own first n. A cell whose
fingerprint differs (a column renamed, retyped, removed or inserted before others), with more
columns than the catalog has, of another format version, or malformed, is an
:class:`~widehouse.errors.HBaseError` naming the table and family; re-run the daily merge for the
day to rewrite it.

Encoding and decoding are vectorised (Arrow + NumPy): no Python loop per column and row.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from widehouse.catalog.schema import PACKED_QUALIFIER
from widehouse.errors import HBaseError
from widehouse.hbase.codec import decode_text, encode_text

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

MAGIC = b"WF"
VERSION = 1
QUALIFIER = PACKED_QUALIFIER.encode()
"""The qualifier of a family's packed cell (``s:0``, ``h:0``)."""
PREFIX = 10
"""Bytes before the null bitmap: magic, version, flags, fingerprint, n."""
MAX_COLUMNS = 65_535


def fingerprint(columns: Sequence[tuple[str, str]]) -> int:
    """CRC-32 of the (column, kind) list as ``"<column>:<kind>\\n"`` lines."""
    return zlib.crc32("".join(f"{name}:{kind}\n" for name, kind in columns).encode("utf-8"))


def header_size(n: int) -> int:
    return PREFIX + (n + 7) // 8 + 4 * (n + 1)


@dataclass(frozen=True)
class FamilyLayout:
    """The columns of one family of one day table: what encodes and decodes its cells."""

    table: str
    family: str
    columns: tuple[tuple[str, str], ...]
    """(column, codec kind), in catalog order."""

    @property
    def cell(self) -> bytes:
        """The full cell name, ``<family>:0``."""
        return f"{self.family}:".encode() + QUALIFIER

    def where(self) -> str:
        return f"HBase table {self.table} family {self.family}"

    def encode(self, rows: pa.Table) -> pa.Array:
        """One packed cell per row of ``rows`` (which has every column of the layout)."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        n = len(self.columns)
        if n > MAX_COLUMNS:
            raise HBaseError(f"{self.where()}: {n} columns; a packed cell holds at most {MAX_COLUMNS}")
        count = rows.num_rows
        texts = [encode_text(rows[name], kind) for name, kind in self.columns]
        nulls = np.zeros((count, max(n, 1)), dtype=bool)
        lengths = np.zeros((count, n + 1), dtype=np.int64)
        for i, text in enumerate(texts):
            nulls[:, i] = text.is_null().to_numpy(zero_copy_only=False)
            lengths[:, i + 1] = pc.fill_null(pc.binary_length(text), 0).to_numpy(zero_copy_only=False)
        offsets = np.cumsum(lengths, axis=1)
        if count and offsets[:, -1].max() >= 2**32:
            raise HBaseError(f"{self.where()}: a row's values exceed 4 GiB")
        prefix = np.frombuffer(
            MAGIC + bytes([VERSION, 0]) + fingerprint(self.columns).to_bytes(4, "big") + n.to_bytes(2, "big"),
            dtype=np.uint8,
        )
        parts = [
            np.broadcast_to(prefix, (count, PREFIX)),
            np.packbits(nulls[:, :n], axis=1, bitorder="little").reshape(count, (n + 7) // 8),
            offsets.astype(">u4").view(np.uint8).reshape(count, 4 * (n + 1)),
        ]
        header = np.ascontiguousarray(np.concatenate(parts, axis=1))
        width = header_size(n)
        fixed = pa.FixedSizeBinaryArray.from_buffers(
            pa.binary(width), count, [None, pa.py_buffer(header.tobytes())]
        )
        values = [pc.fill_null(text, b"") for text in texts]
        return pc.binary_join_element_wise(fixed.cast(pa.binary()), *values, b"")

    def decode(self, cells: Sequence[bytes | None]) -> list[pa.Array]:
        """The layout's columns (one Arrow array each, of the kinds' types) of packed cells.

        A None cell (the row lacks the family) reads as nulls (counts 0), as does a column the
        cell's writer did not have yet.
        """
        import numpy as np
        import pyarrow as pa

        present = [i for i, cell in enumerate(cells) if cell is not None]
        texts = self._texts([cells[i] for i in present])  # type: ignore[misc]
        if len(present) != len(cells):
            where = np.full(len(cells), -1, dtype=np.int64)
            where[present] = np.arange(len(present))
            index = pa.array(where, mask=where < 0)
            texts = [text.take(index) for text in texts]
        return [decode_text(text, kind, name) for text, (name, kind) in zip(texts, self.columns, strict=True)]

    def _texts(self, blobs: list[bytes]) -> list[pa.Array]:
        """Each column's value text of the cells (all present), null where null or not written."""
        import numpy as np
        import pyarrow as pa

        count = len(blobs)
        lengths = np.fromiter((len(b) for b in blobs), dtype=np.int64, count=count)
        if count and lengths.min() < PREFIX:
            raise HBaseError(f"{self.where()}: a cell of {lengths.min()} bytes is not a packed row")
        buffer = np.frombuffer(b"".join(blobs), dtype=np.uint8)
        starts = np.zeros(count, dtype=np.int64)
        np.cumsum(lengths[:-1], out=starts[1:])
        head = buffer[starts[:, None] + np.arange(PREFIX)] if count else np.zeros((0, PREFIX), np.uint8)
        if (head[:, :2] != np.frombuffer(MAGIC, np.uint8)).any():
            raise HBaseError(
                f"{self.where()}: a cell is not a packed row (no 'WF' magic); was the table written by "
                "another layout? Re-run the daily merge for the day into it"
            )
        versions = set(head[:, 2].tolist())
        if versions - {VERSION}:
            raise HBaseError(
                f"{self.where()}: packed cell format version(s) {sorted(versions - {VERSION})}; this "
                f"reader knows version {VERSION}"
            )
        prints = head[:, 4:8].astype(np.int64) @ np.array([1 << 24, 1 << 16, 1 << 8, 1])
        widths = head[:, 8].astype(np.int64) * 256 + head[:, 9]
        total = len(self.columns)
        order: list[np.ndarray] = []
        parts: list[list[pa.Array]] = []
        for n in sorted(set(widths.tolist())):
            rows = np.flatnonzero(widths == n)
            expected = fingerprint(self.columns[:n])
            if n > total or (prints[rows] != expected).any():
                found = sorted({f"{p:08x}" for p in prints[rows].tolist()})
                raise HBaseError(
                    f"{self.where()}: cells of {n} column(s) with schema fingerprint {', '.join(found)} "
                    f"do not match the catalog's first {min(n, total)} of {total} column(s) (fingerprint "
                    f"{expected:08x}): columns were renamed, retyped, removed or inserted before others. "
                    "Re-run the daily merge for the day to rewrite its rows"
                )
            order.append(rows)
            parts.append(self._group(buffer, starts[rows], lengths[rows], n))
        if not parts:
            return [pa.nulls(0, pa.binary()) for _ in self.columns]
        if len(parts) == 1:
            return parts[0]
        inverse = np.empty(count, dtype=np.int64)
        inverse[np.concatenate(order)] = np.arange(count)
        index = pa.array(inverse)
        return [pa.concat_arrays([part[i] for part in parts]).take(index) for i in range(total)]

    def _group(self, buffer: np.ndarray, starts: np.ndarray, lengths: np.ndarray, n: int) -> list[pa.Array]:
        """The columns of cells that all encode ``n`` columns."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        count = len(starts)
        width = header_size(n)
        if lengths.min() < width:
            raise HBaseError(f"{self.where()}: a cell of {lengths.min()} bytes is shorter than its header")
        bitmap = buffer[starts[:, None] + PREFIX + np.arange((n + 7) // 8)]
        nulls = np.unpackbits(bitmap, axis=1, bitorder="little")[:, :n].astype(bool)
        raw = buffer[starts[:, None] + PREFIX + (n + 7) // 8 + np.arange(4 * (n + 1))]
        offsets = np.ascontiguousarray(raw).view(">u4").reshape(count, n + 1).astype(np.int64)
        if (
            (np.diff(offsets, axis=1) < 0).any()
            or (offsets[:, 0] != 0).any()
            or (offsets[:, -1] != lengths - width).any()
        ):
            raise HBaseError(f"{self.where()}: a packed cell's value offsets do not fit its length")
        absolute = offsets + (starts + width)[:, None]
        # one binary array over the whole buffer: per row its n values, then a gap (the next header)
        flat = pa.LargeBinaryArray.from_buffers(
            pa.large_binary(),
            absolute.size - 1,
            [None, pa.py_buffer(absolute.reshape(-1).tobytes()), pa.py_buffer(buffer)],
        )
        base = np.arange(count, dtype=np.int64) * (n + 1)
        columns: list[pa.Array] = []
        for i in range(len(self.columns)):
            if i >= n:
                columns.append(pa.nulls(count, pa.large_binary()))
                continue
            values = flat.take(pa.array(base + i))
            mask = nulls[:, i]
            if mask.any():
                values = pc.if_else(pa.array(mask), pa.scalar(None, pa.large_binary()), values)
            columns.append(values)
        return columns

"""Request and reply bytes: the request body (sized or chunked), its Content-Encoding, reply compression.

A body is read as a stream of chunks, never copied whole unless the SQL itself needs it. The size cap
(``max_body_bytes``) applies both to the bytes on the wire and to the decompressed bytes.
"""

from __future__ import annotations

import gzip
import io
import re
import zlib
from collections.abc import Iterator
from typing import Protocol

from widehouse.clickhouse.server.protocol import QueryError

READ_SIZE = 1 << 20
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")
ENCODINGS = ("zstd", "lz4", "gzip", "deflate")
"""Content encodings accepted for request bodies and offered for replies, most preferred first."""


class BodyTooLargeError(QueryError):
    """The request body is larger than the service accepts."""

    def __init__(self, limit: int) -> None:
        error = QueryError.of(
            "QUERY_IS_TOO_LARGE",
            f"Request body exceeds the limit of {limit} bytes of this service (--max-body-bytes)",
        )
        super().__init__(error.code, error.text)


class Body:
    """The body of one request: ``Content-Length`` bytes, chunked transfer encoding, or nothing.

    Every read is bounded: a sized body is read in pieces of at most :data:`READ_SIZE`, a chunk
    whose size line is not a hexadecimal count or would take the body past ``limit`` is refused
    before its data is read, and a chunk's data is read in pieces too.
    """

    def __init__(self, stream: io.BufferedIOBase, length: int | None, chunked: bool, limit: int) -> None:
        if length is not None and length < 0:
            raise ValueError(f"negative Content-Length {length}")
        self._stream = stream
        self._remaining = length or 0
        self._chunked = chunked
        self._chunk_left = 0
        self._limit = limit
        self.received = 0
        self.malformed = False
        self.finished = not chunked and not length
        self._declared_too_large = length is not None and length > limit

    @property
    def present(self) -> bool:
        return not self.finished or self.received > 0

    def chunks(self) -> Iterator[bytes]:
        """The raw body bytes as they arrive."""
        if self._declared_too_large:
            raise BodyTooLargeError(self._limit)
        while not self.finished:
            data = self._next_chunked(self._limit - self.received) if self._chunked else self._next_sized()
            if data:
                self.received += len(data)
                if self.received > self._limit:
                    raise BodyTooLargeError(self._limit)
                yield data

    def abandon(self) -> None:
        """Never read the rest (the connection is closed instead), e.g. for a client too slow to wait for."""
        self.malformed = True

    def drain(self, cap: int) -> bool:
        """Read and drop what is left of the body (at most ``cap`` bytes); False if more was left."""
        dropped = 0
        try:
            if self._declared_too_large or self.malformed:
                return False
            while not self.finished and dropped <= cap:
                data = self._next_chunked(cap - dropped) if self._chunked else self._next_sized()
                dropped += len(data)
        except (OSError, QueryError):
            return False
        return self.finished

    def _next_sized(self) -> bytes:
        data = self._stream.read(min(READ_SIZE, self._remaining))
        if not data:
            raise QueryError.of("CANNOT_READ_ALL_DATA", "Request body ended before its Content-Length")
        self._remaining -= len(data)
        self.finished = self._remaining == 0
        return data

    def _next_chunked(self, budget: int) -> bytes:
        if self._chunk_left == 0:
            line = self._stream.readline(1024)
            text = line.split(b";", 1)[0].strip()
            if not _HEX.fullmatch(text):
                self.malformed = True
                raise QueryError.of("BAD_ARGUMENTS", f"Malformed chunk size line {line[:40]!r}")
            size = int(text, 16)
            if size == 0:
                for _ in range(64):  # trailers, up to a blank line
                    if self._stream.readline(1024) in (b"\r\n", b"\n", b""):
                        break
                else:
                    self.malformed = True
                    raise QueryError.of("BAD_ARGUMENTS", "Too many trailers after a chunked request body")
                self.finished = True
                return b""
            if size > budget:  # refused unread: the rest of the body is not drained either
                self.malformed = True
                raise BodyTooLargeError(self._limit)
            self._chunk_left = size
        data = self._stream.read(min(READ_SIZE, self._chunk_left))
        if not data:
            self.malformed = True
            raise QueryError.of("BAD_ARGUMENTS", "Chunked request body ended inside a chunk")
        self._chunk_left -= len(data)
        if self._chunk_left == 0 and self._stream.readline(16) not in (b"\r\n", b"\n"):
            self.malformed = True
            raise QueryError.of("BAD_ARGUMENTS", "Malformed chunked request body")
        return data


class _Decompressor(Protocol):
    eof: bool
    unused_data: bytes

    def decompress(self, data: bytes, max_length: int = -1) -> bytes: ...


def _decompressor(encoding: str) -> _Decompressor:
    if encoding == "gzip":
        return zlib.decompressobj(wbits=31)  # type: ignore[return-value]
    if encoding == "deflate":
        return zlib.decompressobj(wbits=15)  # type: ignore[return-value]
    if encoding == "lz4":
        import lz4.frame

        return lz4.frame.LZ4FrameDecompressor()  # type: ignore[no-any-return]
    from backports import zstd

    return zstd.ZstdDecompressor()  # type: ignore[return-value]


def decoded(chunks: Iterator[bytes], encoding: str | None, limit: int) -> Iterator[bytes]:
    """The body decompressed per its ``Content-Encoding``; concatenated frames (one per block) are fine.

    Decompression is streamed: each call inflates at most :data:`READ_SIZE` bytes, so a small body
    that inflates past ``limit`` is refused after ``limit`` bytes, never inflated whole.
    """
    name = (encoding or "").strip().lower()
    if name in ("", "identity"):
        yield from chunks
        return
    if name not in ENCODINGS:
        raise QueryError.of("UNKNOWN_COMPRESSION_METHOD", f"Unknown Content-Encoding '{encoding}'")
    total = 0
    decoder = _decompressor(name)
    try:
        for chunk in chunks:
            data = chunk
            while True:
                out, data = _inflate(decoder, data)
                if out:
                    total += len(out)
                    if total > limit:
                        raise BodyTooLargeError(limit)
                    yield out
                if decoder.eof:
                    data = decoder.unused_data  # all input after the frame (zlib also leaves it in the tail)
                    decoder = _decompressor(name)
                    if data:
                        continue
                if not data and not out:
                    break
    except QueryError:
        raise
    except Exception as exc:  # each codec has its own error type; all mean a corrupt body
        raise QueryError.of("CANNOT_DECOMPRESS", f"Cannot decompress the {name} request body: {exc}") from exc


def _inflate(decoder: _Decompressor, data: bytes) -> tuple[bytes, bytes]:
    """At most :data:`READ_SIZE` bytes inflated from ``data`` (or from input the decoder holds) and
    the input still to feed."""
    tail = getattr(decoder, "unconsumed_tail", None)
    if tail is not None:  # zlib: input it did not use comes back as unconsumed_tail
        out = decoder.decompress(data, READ_SIZE)
        return out, decoder.unconsumed_tail  # type: ignore[attr-defined]
    if not data and getattr(decoder, "needs_input", True):
        return b"", b""
    return decoder.decompress(data, max_length=READ_SIZE), b""


def reply_encoding(accept_encoding: str | None) -> str | None:
    """The reply compression to use for an ``Accept-Encoding`` list, or None."""
    offered = {part.split(";")[0].strip().lower() for part in (accept_encoding or "").split(",")}
    return next((name for name in ENCODINGS if name in offered), None)


def compress(data: bytes, encoding: str, level: int = 3) -> bytes:
    """``data`` compressed as one frame (the client decompresses a reply in one go)."""
    if encoding == "gzip":
        return gzip.compress(data, compresslevel=max(1, min(level, 9)))
    if encoding == "deflate":
        return zlib.compress(data, max(1, min(level, 9)))
    if encoding == "lz4":
        import lz4.frame

        return lz4.frame.compress(data)  # type: ignore[no-any-return]
    from backports import zstd

    return zstd.compress(data)

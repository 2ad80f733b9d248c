"""Many small admin REST requests at once, pipelined over a few keep-alive connections.

The source asks the broker about every partition it reads: the last and first entry of each
(``HEAD .../examinemessage``) and a durable subscription on each (``PUT .../subscription/<name>``),
1,000s of requests when an app starts. Through ``requests`` each costs ~0.4 ms of the client's CPU
(sessions, adapters, header objects) and the threads that send them share one interpreter: 500
``examinemessage`` took ~0.4 s on this box, the broker mostly waiting. :func:`send_all` writes
them from one event loop over ``connections`` sockets with a minimal HTTP/1.1 exchange: the same
500 in ~0.07 s.

It covers what those calls need and nothing more: plain ``http://``, given headers (the token), no
proxy, no redirect, bodies by ``Content-Length`` or chunked. The admin client decides when its
requests may go this way (:meth:`widehouse.pulsar.admin.PulsarAdmin.pipelined`); anything else
(TLS, a proxy, netrc credentials, a broker that redirects to a topic's owner) stays with it, and so
does any answer its callers cannot take as it is: they send those requests again through the admin
client, which raises the errors with their full explanation.
"""

from __future__ import annotations

import json as jsonlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urlsplit

if TYPE_CHECKING:  # imported where requests are sent: most processes that import this never send
    import asyncio

CONNECTIONS = 16


@dataclass(frozen=True)
class Request:
    """One admin call: ``method`` on ``admin/v2/<path>`` (already quoted) with query ``params``."""

    method: str
    path: str
    params: Mapping[str, Any] | None = None
    json: Any = None


@dataclass(frozen=True)
class Answer:
    """The broker's answer: status, headers (any case), body."""

    status: int
    headers: Mapping[str, str]
    body: bytes


def send_all(
    base_url: str,
    headers: Mapping[str, str],
    requests: Sequence[Request],
    timeout: float,
    connections: int = CONNECTIONS,
) -> list[Answer | Exception]:
    """Every request's answer, in order; an exception where none came (refused, timed out, cut).
    ``base_url`` is the admin service's plain ``http://`` URL."""
    if not requests:
        return []
    base = urlsplit(base_url)
    if base.scheme != "http":
        raise ValueError(f"only plain http:// is sent pipelined, not {base.scheme}://")
    import asyncio

    try:
        return asyncio.run(_send_all(base, headers, list(requests), connections, timeout))
    except RuntimeError as exc:  # called inside a running event loop: the caller sends them itself
        return [exc] * len(requests)


async def _send_all(
    base: Any, headers: Mapping[str, str], requests: list[Request], connections: int, timeout: float
) -> list[Answer | Exception]:
    import asyncio

    answers: list[Answer | Exception | None] = [None] * len(requests)
    pending = iter(range(len(requests)))

    async def worker() -> None:
        connection: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        for i in pending:
            try:
                if connection is None:
                    connection = await asyncio.wait_for(
                        asyncio.open_connection(base.hostname, base.port or 80), timeout
                    )
                answer, keep = await asyncio.wait_for(
                    _exchange(*connection, base, headers, requests[i]), timeout
                )
                answers[i] = answer
            except (
                TimeoutError,
                OSError,
                asyncio.IncompleteReadError,
                asyncio.LimitOverrunError,
                ValueError,
                IndexError,  # not an HTTP status line
            ) as exc:
                answers[i] = exc
                keep = False
            if not keep and connection is not None:
                connection[1].close()
                connection = None
        if connection is not None:
            connection[1].close()

    await asyncio.gather(*(worker() for _ in range(max(1, min(connections, len(requests))))))
    return [a if a is not None else RuntimeError("no answer") for a in answers]


async def _exchange(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    base: Any,
    headers: Mapping[str, str],
    request: Request,
) -> tuple[Answer, bool]:
    """Send one request, read its answer; also whether the connection may be used again."""
    from requests.structures import CaseInsensitiveDict

    target = f"{base.path.rstrip('/')}/admin/v2/{request.path}"
    if request.params:
        target += "?" + urlencode(request.params)
    body = b"" if request.json is None else jsonlib.dumps(request.json).encode()
    lines = [f"{request.method} {target} HTTP/1.1", f"Host: {base.netloc}", "Accept: */*"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    if request.json is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    elif request.method in ("PUT", "POST"):
        lines.append("Content-Length: 0")
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
    await writer.drain()
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
    status = int(head[0].split(" ", 2)[1])
    found: CaseInsensitiveDict[str] = CaseInsensitiveDict()
    for line in head[1:]:
        if line:
            name, _, value = line.partition(":")
            found[name.strip()] = value.strip()
    content = b""
    if request.method != "HEAD" and status not in (204, 304) and status >= 200:
        if found.get("Transfer-Encoding", "").lower() == "chunked":
            content = await _chunked(reader)
        else:
            content = await reader.readexactly(int(found.get("Content-Length", "0")))
    keep = found.get("Connection", "").lower() != "close"
    return Answer(status, found, content), keep


async def _chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";")[0].strip(), 16)
        if size == 0:
            await reader.readuntil(b"\r\n")  # no trailers here: the empty line
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)

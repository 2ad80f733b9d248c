"""Admin requests sent pipelined (``widehouse.pulsar.bulk`` through ``PulsarAdmin.pipelined``):
answers framed by length, chunked or empty, in order, over kept connections; a connection the server
closes is opened again; what cannot be sent this way is left to the admin client."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

import pytest

from widehouse.pulsar import bulk
from widehouse.pulsar.admin import PulsarAdmin
from widehouse.settings import PulsarSettings

ANSWERS = {
    "HEAD": b"HTTP/1.1 200 OK\r\nX-Pulsar-Message-ID: 7:3\r\nContent-Length: 42\r\n\r\n",  # no body follows
    "GET": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
    "PUT": b"HTTP/1.1 204 No Content\r\n\r\n",
    "POST": b"HTTP/1.1 409 Conflict\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n",
    "DELETE": b"HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 2\r\n\r\nno",
    "PATCH": b"garbage\r\n\r\n",  # not HTTP at all
}


tokens: list[str] = []
"""The Authorization headers the server got (cleared when it starts)."""


@contextlib.contextmanager
def _server() -> Iterator[tuple[str, list[tuple[int, str, str]]]]:
    """Answers each request by its method (:data:`ANSWERS`) on kept connections; records
    (connection number, request line, body)."""
    seen: list[tuple[int, str, str]] = []
    tokens.clear()
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()

    def serve(conn: socket.socket, number: int) -> None:
        buffer = b""
        with conn:
            while True:
                while b"\r\n\r\n" not in buffer:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buffer += data
                head, buffer = buffer.split(b"\r\n\r\n", 1)
                lines = head.decode().split("\r\n")
                length = next(
                    (int(x.split(":")[1]) for x in lines if x.lower().startswith("content-length")), 0
                )
                while len(buffer) < length:
                    buffer += conn.recv(65536)
                body, buffer = buffer[:length], buffer[length:]
                seen.append((number, lines[0], body.decode()))
                tokens.extend(
                    x.split(":", 1)[1].strip() for x in lines if x.lower().startswith("authorization")
                )
                method = lines[0].split(" ")[0]
                conn.sendall(ANSWERS[method])
                if method == "DELETE":
                    return

    def accept() -> None:
        number = 0
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn, number), daemon=True).start()
            number += 1

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}", seen
    finally:
        server.close()


def _admin(url: str, token: str | None = None) -> PulsarAdmin:
    return PulsarAdmin(
        PulsarSettings(service_url="pulsar://127.0.0.1:1", admin_url=url, auth_token=token), timeout=5
    )


def test_answers_come_back_in_order_whatever_their_framing() -> None:
    calls = [
        bulk.Request("HEAD", "persistent/t/ns/a/examinemessage", {"initialPosition": "latest"}),
        bulk.Request("GET", "clusters"),
        bulk.Request("PUT", "persistent/t/ns/a/subscription/s", json={"ledgerId": -1}),
        bulk.Request("POST", "persistent/t/ns/a/x"),
        bulk.Request("DELETE", "persistent/t/ns/a"),
        bulk.Request("GET", "clusters"),
    ]
    with _server() as (url, seen), _admin(url) as admin:
        answers = admin.pipelined(calls, connections=1)
    assert answers is not None
    got = [(a.status, a.body) for a in answers if isinstance(a, bulk.Answer)]
    assert got == [(200, b""), (200, b"hello"), (204, b""), (409, b"abcdefg"), (404, b"no"), (200, b"hello")]
    first = answers[0]
    assert isinstance(first, bulk.Answer) and first.headers["x-pulsar-message-id"] == "7:3"  # any case
    assert [line for _, line, _ in seen] == [
        "HEAD /admin/v2/persistent/t/ns/a/examinemessage?initialPosition=latest HTTP/1.1",
        "GET /admin/v2/clusters HTTP/1.1",
        "PUT /admin/v2/persistent/t/ns/a/subscription/s HTTP/1.1",
        "POST /admin/v2/persistent/t/ns/a/x HTTP/1.1",
        "DELETE /admin/v2/persistent/t/ns/a HTTP/1.1",
        "GET /admin/v2/clusters HTTP/1.1",
    ]
    assert seen[2][2] == '{"ledgerId": -1}'
    # one connection until the server closed it after the DELETE, then a new one
    assert [number for number, _, _ in seen] == [0, 0, 0, 0, 0, 1]


def test_the_token_goes_with_every_request_and_failures_are_answers_of_their_own() -> None:
    with _server() as (url, seen), _admin(url, token="t0k3n") as admin:
        answers = admin.pipelined([bulk.Request("GET", "clusters")] * 3, connections=2)
    assert answers is not None and all(isinstance(a, bulk.Answer) and a.status == 200 for a in answers)
    assert len(seen) == 3 and tokens == ["Bearer t0k3n"] * 3
    with _admin("http://127.0.0.1:1") as admin:  # nothing listens there
        answers = admin.pipelined([bulk.Request("GET", "clusters")] * 2)
    assert answers is not None and all(isinstance(a, OSError) for a in answers)


def test_an_answer_that_is_not_http_is_an_answer_of_its_own_not_a_crash() -> None:
    calls = [bulk.Request("PATCH", "x"), bulk.Request("GET", "clusters")]
    with _server() as (url, _seen), _admin(url) as admin:
        answers = admin.pipelined(calls, connections=1)
    assert answers is not None and isinstance(answers[0], IndexError)
    assert isinstance(answers[1], bulk.Answer) and answers[1].body == b"hello"  # on a new connection


def test_what_the_admin_client_must_send_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = [bulk.Request("GET", "clusters")]
    with _admin("https://127.0.0.1:1") as admin:
        assert admin.pipelined(calls) is None  # TLS stays with requests
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    with _admin("http://broker.invalid:8080") as admin:
        assert admin.pipelined(calls) is None  # through a proxy
    with pytest.raises(ValueError, match="https"):
        bulk.send_all("https://127.0.0.1:1", {}, calls, timeout=1)

"""The admin client survives the broker closing an idle keep-alive connection (reads only)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from widehouse.errors import PulsarError
from widehouse.pulsar.admin import PulsarAdmin
from widehouse.settings import PulsarSettings

BODY = b'["persistent://t/ns/a"]'
OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(BODY), BODY)


@pytest.fixture
def flaky_server() -> Iterator[tuple[str, list[str]]]:
    """Each connection gets one request; the first is dropped without an answer, the rest get 200."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    seen: list[str] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                request = conn.recv(65536).decode()
                seen.append(request.split(" ", 1)[0])
                if len(seen) > 1:
                    conn.sendall(OK)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}", seen
    server.close()


def test_a_read_is_retried_on_a_dropped_connection(flaky_server: tuple[str, list[str]]) -> None:
    url, seen = flaky_server
    with PulsarAdmin(PulsarSettings(service_url="pulsar://127.0.0.1:1", admin_url=url), timeout=5) as admin:
        assert admin.request("GET", "persistent/t/ns") == ["persistent://t/ns/a"]
    assert seen == ["GET", "GET"]


def test_a_write_is_never_retried(flaky_server: tuple[str, list[str]]) -> None:
    url, seen = flaky_server
    admin = PulsarAdmin(PulsarSettings(service_url="pulsar://127.0.0.1:1", admin_url=url), timeout=5)
    with admin, pytest.raises(PulsarError, match="PUT"):
        admin.request("PUT", "persistent/t/ns/a")
    assert seen == ["PUT"]

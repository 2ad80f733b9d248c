"""The admin client survives the broker closing an idle keep-alive connection (reads only), a
cursor reset survives a subscription the broker is busy with (resets only), and the environment's
proxy settings, read once when the client is made, still apply to every request."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator

import pytest

from widehouse.errors import PulsarError
from widehouse.pulsar.admin import BUSY_ATTEMPTS, CursorResetRefusedError, PulsarAdmin, SubscriptionBusyError
from widehouse.pulsar.positions import Position
from widehouse.settings import PulsarSettings

BODY = b'["persistent://t/ns/a"]'
OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(BODY), BODY)


@contextlib.contextmanager
def _server(reply: Callable[[str], bytes | None]) -> Iterator[str]:
    """A one-request-per-connection HTTP server: ``reply(request line)`` is sent back (None: the
    connection is closed without an answer)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                answer = reply(conn.recv(65536).decode().split("\r\n", 1)[0])
                if answer is not None:
                    conn.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        server.close()


@pytest.fixture
def flaky_server() -> Iterator[tuple[str, list[str]]]:
    """Each connection gets one request; the first is dropped without an answer, the rest get 200."""
    seen: list[str] = []

    def reply(line: str) -> bytes | None:
        seen.append(line.split(" ", 1)[0])
        return OK if len(seen) > 1 else None

    with _server(reply) as url:
        yield url, seen


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


@pytest.fixture
def answering_server() -> Iterator[tuple[str, list[str]]]:
    """Answers every request 200; records the request lines."""
    seen: list[str] = []

    def reply(line: str) -> bytes | None:
        seen.append(line)
        return OK

    with _server(reply) as url:
        yield url, seen


def test_the_environments_proxy_is_read_once_and_still_used(
    monkeypatch: pytest.MonkeyPatch, answering_server: tuple[str, list[str]]
) -> None:
    proxy, seen = answering_server
    monkeypatch.setenv("HTTP_PROXY", proxy)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    admin = PulsarAdmin(
        PulsarSettings(service_url="pulsar://broker.invalid:1", admin_url="http://broker.invalid:8080")
    )
    monkeypatch.delenv("HTTP_PROXY")  # read when the client was made, not per request
    with admin:
        assert admin.request("GET", "persistent/t/ns") == ["persistent://t/ns/a"]
        assert admin.request("GET", "persistent/t/ns") == ["persistent://t/ns/a"]
    assert seen == ["GET http://broker.invalid:8080/admin/v2/persistent/t/ns HTTP/1.1"] * 2  # via the proxy


def test_no_proxy_still_bypasses_the_proxy(
    monkeypatch: pytest.MonkeyPatch, answering_server: tuple[str, list[str]]
) -> None:
    broker, seen = answering_server
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    with PulsarAdmin(
        PulsarSettings(service_url="pulsar://127.0.0.1:1", admin_url=broker), timeout=5
    ) as admin:
        assert admin.request("GET", "persistent/t/ns") == ["persistent://t/ns/a"]
    assert seen == ["GET /admin/v2/persistent/t/ns HTTP/1.1"]  # straight to the broker


BUSY = b'{"reason":"Failed for Subscription Busy: Failed to fence subscription"}'
OTHER = b'{"reason":"Cursor reset is not supported here"}'


def _answer(status: str, body: bytes) -> bytes:
    fields = f"Connection: close\r\nContent-Type: application/json\r\nContent-Length: {len(body)}"
    head = f"HTTP/1.1 {status}\r\n{fields}\r\n\r\n"
    return head.encode() + body


@pytest.fixture
def scripted_server() -> Iterator[tuple[str, list[bytes], list[str]]]:
    """Answers each request with the next scripted answer (then 204s), one request per connection."""
    script: list[bytes] = []
    seen: list[str] = []

    def reply(line: str) -> bytes:
        seen.append(line.rsplit(" ", 1)[0])
        return script.pop(0) if script else b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n"

    with _server(reply) as url:
        yield url, script, seen


def _admin(url: str) -> PulsarAdmin:
    return PulsarAdmin(PulsarSettings(service_url="pulsar://127.0.0.1:1", admin_url=url), timeout=5)


def test_a_cursor_reset_is_retried_while_the_subscription_is_busy(
    scripted_server: tuple[str, list[bytes], list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # a grown topic: the broker copies subscriptions onto the new partitions and answers 412 meanwhile
    url, script, seen = scripted_server
    monkeypatch.setattr("widehouse.pulsar.admin.time.sleep", lambda _s: None)
    script += [_answer("412 Precondition Failed", BUSY)] * 2
    with _admin(url) as admin:
        admin.reset_cursor("persistent://t/ns/a-partition-1", "widehouse-app", Position(5, 7))
        admin.reset_cursor_to_time("persistent://t/ns/a", "widehouse-app", 0)
    assert seen == [
        "POST /admin/v2/persistent/t/ns/a-partition-1/subscription/widehouse-app/resetcursor",
        "POST /admin/v2/persistent/t/ns/a-partition-1/subscription/widehouse-app/resetcursor",
        "POST /admin/v2/persistent/t/ns/a-partition-1/subscription/widehouse-app/resetcursor",
        "POST /admin/v2/persistent/t/ns/a/subscription/widehouse-app/resetcursor/0",
    ]


def test_a_subscription_busy_for_good_is_a_named_error(
    scripted_server: tuple[str, list[bytes], list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, script, seen = scripted_server
    monkeypatch.setattr("widehouse.pulsar.admin.time.sleep", lambda _s: None)
    script += [_answer("412 Precondition Failed", BUSY)] * BUSY_ATTEMPTS
    with _admin(url) as admin, pytest.raises(SubscriptionBusyError, match="stayed busy after 6 attempts"):
        admin.reset_cursor_to_time("persistent://t/ns/a", "widehouse-app", 0)
    assert len(seen) == BUSY_ATTEMPTS


def test_another_precondition_failure_is_not_retried(
    scripted_server: tuple[str, list[bytes], list[str]],
) -> None:
    url, script, seen = scripted_server
    script.append(_answer("412 Precondition Failed", OTHER))
    with _admin(url) as admin, pytest.raises(PulsarError, match=r"answered 412: .*not supported") as raised:
        admin.reset_cursor("persistent://t/ns/a", "widehouse-app", Position(1, 2))
    assert not isinstance(raised.value, SubscriptionBusyError)
    assert isinstance(raised.value, CursorResetRefusedError)  # a caller may leave it for later
    assert len(seen) == 1

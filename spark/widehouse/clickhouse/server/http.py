"""The HTTP side of the service: a threaded HTTP/1.1 server on loopback, one thread per connection.

Connections are kept alive between requests (clickhouse-connect pools them). :meth:`stop` stops
accepting, lets requests in flight finish, closes idle connections, then closes the engine handles.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from socketserver import TCPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from widehouse.clickhouse.server.codec import Body
from widehouse.clickhouse.server.config import ServerConfig
from widehouse.clickhouse.server.engine import EnginePool
from widehouse.clickhouse.server.executor import Executor, Reply, Request
from widehouse.clickhouse.server.protocol import Headers, QueryError
from widehouse.clickhouse.server.sessions import SessionStore
from widehouse.errors import PortInUseError, ServiceError

log = logging.getLogger(__name__)

_LENGTH = re.compile(r"[0-9]{1,18}")

DRAIN_CAP = 64 << 20
"""A refused or failed request's unread body is read and dropped up to this size (so the client sees
the reply); beyond it the connection is closed instead."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "widehouse-chdb"
    server: _Server
    busy = False
    head_deadline: float | None = None
    """While the request line and headers are being read: when they must be complete."""
    head_expired = False

    def handle_one_request(self) -> None:
        """Wait (up to the idle timeout) for a request to start, then give it ``head_timeout`` seconds
        to send its request line and headers (see :meth:`_Server.service_actions`)."""
        self.head_deadline = None
        try:
            started = self.rfile.peek(1)  # type: ignore[attr-defined]
        except OSError:  # idle timeout or a reset: the connection ends
            started = b""
        if not started:
            self.close_connection = True
            return
        self.head_expired = False
        self.head_deadline = time.monotonic() + self.server.config.head_timeout
        try:
            super().handle_one_request()
        finally:
            self.head_deadline = None

    def parse_request(self) -> bool:
        parsed = super().parse_request()
        self.head_deadline = None
        if self.head_expired:
            self.close_connection = True
            return False
        return parsed

    def setup(self) -> None:
        self.request.settimeout(self.server.config.idle_timeout)
        # replies go out as headers then body: without this, Nagle + delayed ACK add ~40 ms to small ones
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().setup()
        self.server.track(self, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.track(self, add=False)

    def do_GET(self) -> None:
        self.busy = True
        try:
            self._serve()
        finally:
            self.busy = False

    def do_POST(self) -> None:
        self.do_GET()

    def _serve(self) -> None:
        executor = self.server.executor
        parts = urlsplit(self.path)
        headers = Headers(self.headers.items())
        chunked = "chunked" in headers.get("Transfer-Encoding", "").lower()
        declared = headers.get("Content-Length", "").strip()
        if not chunked and declared and not _LENGTH.fullmatch(declared):
            self.close_connection = True
            self._send(
                executor.error_reply(
                    QueryError.of("BAD_ARGUMENTS", f"Malformed Content-Length header {declared[:40]!r}")
                )
            )
            return
        length = None if chunked else int(declared or 0)
        body = Body(self.rfile, length, chunked, self.server.config.max_body_bytes)
        request = Request(
            self.command, parts.path, parse_qsl(parts.query, keep_blank_values=True), headers, body
        )
        reply = executor.reply(request)
        # an unauthenticated client's body is never read: the connection is closed instead
        if not body.finished and not (request.authenticated and body.drain(DRAIN_CAP)):
            self.close_connection = True
        self._send(reply)

    def _send(self, reply: Reply) -> None:
        self.send_response(reply.status)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(reply.body)))
        if self.close_connection or self.server.stopping:
            self.send_header("Connection", "close")
        else:
            self.send_header("Keep-Alive", f"timeout={int(self.server.config.idle_timeout)}")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(reply.body)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    def close_idle(self) -> None:
        """Wake a thread waiting for this connection's next request: it then ends."""
        with contextlib.suppress(OSError):  # already closed by the client
            self.connection.shutdown(socket.SHUT_RDWR)


class _Server(ThreadingHTTPServer):
    daemon_threads = False
    block_on_close = True
    request_queue_size = 128

    def __init__(self, config: ServerConfig, executor: Executor) -> None:
        self.config = config
        self.executor = executor
        self.stopping = False
        self._active = 0
        self._handlers: set[_Handler] = set()
        self._lock = threading.Lock()
        family = socket.getaddrinfo(config.host, config.port, proto=socket.IPPROTO_TCP)[0][0]
        self.address_family = family
        super().__init__((config.host, config.port), _Handler)

    def server_bind(self) -> None:
        TCPServer.server_bind(self)  # skips HTTPServer's reverse DNS lookup of the host
        self.server_name = self.config.host
        self.server_port = int(self.server_address[1])

    def service_actions(self) -> None:
        """Between accepts (every poll interval): cut off clients too slow to send a request head."""
        now = time.monotonic()
        with self._lock:
            late = [h for h in self._handlers if h.head_deadline is not None and now > h.head_deadline]
        for handler in late:
            log.warning("closing a connection that sent no complete request head in time (--head-timeout)")
            handler.head_expired = True
            handler.head_deadline = None
            handler.close_idle()

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve a connection on its own thread, or answer 503 and close it when at the cap."""
        with self._lock:
            full = self._active >= self.config.max_connections
            if not full:
                self._active += 1
        if not full:
            super().process_request(request, client_address)
            return
        log.warning(
            "refusing a connection from %s: %d open (--max-connections)", client_address, self._active
        )
        error = QueryError.of(
            "TOO_MANY_SIMULTANEOUS_QUERIES",
            f"Too many open connections: the limit of this service is {self.config.max_connections} "
            "(--max-connections)",
        )
        reply = self.executor.error_reply(error)
        head = "".join(f"{name}: {value}\r\n" for name, value in reply.headers.items())
        message = (
            f"HTTP/1.1 503 Service Unavailable\r\n{head}Content-Length: {len(reply.body)}\r\n"
            "Connection: close\r\n\r\n"
        ).encode() + reply.body
        with contextlib.suppress(OSError):  # the client may already be gone
            request.settimeout(1.0)
            request.sendall(message)
        self.shutdown_request(request)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._lock:
                self._active -= 1

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.exception("connection from %s failed", client_address)

    def track(self, handler: _Handler, add: bool) -> None:
        with self._lock:
            if add:
                self._handlers.add(handler)
            else:
                self._handlers.discard(handler)

    def close_connections(self, grace: float) -> None:
        """Close idle connections until none is left; after ``grace`` seconds close busy ones too."""
        deadline = time.monotonic() + grace
        while True:
            with self._lock:
                handlers = list(self._handlers)
            if not handlers:
                return
            late = time.monotonic() > deadline
            for handler in handlers:
                if late or not handler.busy:
                    handler.close_idle()
            time.sleep(0.05)


class ClickHouseService:
    """The engine pool, the sessions and the HTTP server of one service process."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        caps = {
            "max_execution_time": str(config.max_execution_time),
            "max_memory_usage": str(config.max_memory_usage),
        }
        self.pool = EnginePool(config.data_dir, config.handles, caps, config.acquire_timeout)
        try:
            self.executor = Executor(config, self.pool, SessionStore())
            self.server = _Server(config, self.executor)
        except OSError as exc:
            self.pool.close()
            if exc.errno == errno.EADDRINUSE:
                raise PortInUseError(
                    f"ClickHouse service port {config.port} on {config.host} is already in use "
                    "(--port, WIDEHOUSE_CLICKHOUSE_PORT)"
                ) from exc
            raise ServiceError(
                f"ClickHouse service cannot listen on {config.host}:{config.port}: {exc}"
            ) from exc
        except BaseException:
            self.pool.close()
            raise

    @property
    def port(self) -> int:
        return self.server.server_port

    @property
    def url(self) -> str:
        host = f"[{self.config.host}]" if ":" in self.config.host else self.config.host
        return f"http://{host}:{self.port}"

    def run(self, grace: float = 60.0) -> None:
        """Serve until :meth:`request_stop`; then finish requests in flight (up to ``grace`` s) and
        close the engine handles."""
        try:
            self.server.serve_forever(poll_interval=0.2)
        finally:
            self.server.stopping = True
            self.server.close_connections(grace)
            self.server.server_close()
            self.pool.close()

    def request_stop(self) -> None:
        """Make :meth:`run` return; safe from a signal handler and from any thread."""
        self.server.stopping = True
        threading.Thread(target=self.server.shutdown, name="stop", daemon=True).start()

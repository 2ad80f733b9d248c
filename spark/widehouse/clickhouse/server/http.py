"""The HTTP side of the service: a threaded HTTP/1.1 server on loopback, one thread per connection.

Connections are kept alive between requests (clickhouse-connect pools them). :meth:`stop` stops
accepting, lets requests in flight finish, closes idle connections, then closes the engine handles.
"""

from __future__ import annotations

import contextlib
import errno
import logging
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

DRAIN_CAP = 64 << 20
"""A refused or failed request's unread body is read and dropped up to this size (so the client sees
the reply); beyond it the connection is closed instead."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "widehouse-chdb"
    server: _Server
    busy = False

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
        try:
            length = None if chunked else int(headers.get("Content-Length", "0") or 0)
        except ValueError:
            self.close_connection = True
            self._send(
                executor.error_reply(QueryError.of("BAD_ARGUMENTS", "Malformed Content-Length header"))
            )
            return
        body = Body(self.rfile, length, chunked, self.server.config.max_body_bytes)
        request = Request(
            self.command, parts.path, parse_qsl(parts.query, keep_blank_values=True), headers, body
        )
        reply = executor.reply(request)
        if not body.finished and not body.drain(DRAIN_CAP):
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
        self._handlers: set[_Handler] = set()
        self._lock = threading.Lock()
        family = socket.getaddrinfo(config.host, config.port, proto=socket.IPPROTO_TCP)[0][0]
        self.address_family = family
        super().__init__((config.host, config.port), _Handler)

    def server_bind(self) -> None:
        TCPServer.server_bind(self)  # skips HTTPServer's reverse DNS lookup of the host
        self.server_name = self.config.host
        self.server_port = int(self.server_address[1])

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
        self.pool = EnginePool(config.data_dir, config.handles)
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

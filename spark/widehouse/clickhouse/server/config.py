"""The service's configuration: one frozen object built from the command line and the environment."""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass, field
from pathlib import Path

from widehouse.errors import ConfigError

PASSWORD_ENV = "WIDEHOUSE_CLICKHOUSE_PASSWORD"  # noqa: S105 (a variable name, not a password)
"""The environment variable holding the password (never passed on the command line)."""

DEFAULT_PORT = 8123
DEFAULT_HANDLES = 4
DEFAULT_MAX_BODY_BYTES = 1 << 30
DEFAULT_IDLE_TIMEOUT = 300.0
DEFAULT_MAX_CONNECTIONS = 64
DEFAULT_MAX_EXECUTION_TIME = 600
DEFAULT_MAX_MEMORY_USAGE = 4 << 30
DEFAULT_ACQUIRE_TIMEOUT = 120.0
DEFAULT_HEAD_TIMEOUT = 60.0


@dataclass(frozen=True)
class ServerConfig:
    """Where the engine keeps its data, where the service listens and who may use it.

    ``handles`` is the number of chDB connection handles (queries and inserts that run at once);
    ``max_body_bytes`` caps a request body (on the wire and decompressed); ``idle_timeout`` is how
    long a connection may stay silent (between requests or mid-upload) before it is closed.
    ``max_connections`` caps open connections (one thread each; more are answered 503 and closed);
    ``max_execution_time`` (s) and ``max_memory_usage`` (bytes) are each query's engine limits (a
    request may lower them, not lift them); ``acquire_timeout`` is how long a request waits for a
    free engine handle; ``head_timeout`` is how long the client may take to send the query text.
    The password is required: there is no user without one.
    """

    data_dir: Path
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    user: str = "default"
    password: str = field(default="", repr=False)
    handles: int = DEFAULT_HANDLES
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    log_file: Path | None = None
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_execution_time: int = DEFAULT_MAX_EXECUTION_TIME
    max_memory_usage: int = DEFAULT_MAX_MEMORY_USAGE
    acquire_timeout: float = DEFAULT_ACQUIRE_TIMEOUT
    head_timeout: float = DEFAULT_HEAD_TIMEOUT

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"ClickHouse service port {self.port} is not in 0..65535 (--port)")
        if self.handles < 1:
            raise ConfigError(
                f"ClickHouse service needs at least one engine handle, got {self.handles} (--handles)"
            )
        if self.max_body_bytes < 1024:
            raise ConfigError(f"--max-body-bytes {self.max_body_bytes} is too small (minimum 1024)")
        if self.idle_timeout <= 0:
            raise ConfigError(f"--idle-timeout must be positive, got {self.idle_timeout}")
        if not self.user:
            raise ConfigError("ClickHouse service user is empty (--user)")
        for name, value in (
            ("--max-connections", self.max_connections),
            ("--max-execution-time", self.max_execution_time),
            ("--max-memory-usage", self.max_memory_usage),
            ("--acquire-timeout", self.acquire_timeout),
            ("--head-timeout", self.head_timeout),
        ):
            if value <= 0:
                raise ConfigError(f"{name} must be positive, got {value}")
        require_loopback(self.host)
        if not self.password:
            raise ConfigError(
                f"ClickHouse service password is not set: export {PASSWORD_ENV} (the service accepts no "
                "user without a password)"
            )


def require_loopback(host: str) -> None:
    """Raise :class:`ConfigError` unless every address ``host`` resolves to is a loopback address."""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except OSError as exc:
        raise ConfigError(f"ClickHouse service host {host!r} does not resolve (--host): {exc}") from exc
    addresses = {str(info[4][0]) for info in infos}
    outside = sorted(a for a in addresses if not ipaddress.ip_address(a.split("%")[0]).is_loopback)
    if outside or not addresses:
        raise ConfigError(
            f"ClickHouse service host {host!r} resolves to non-loopback address(es) {', '.join(outside)}; "
            "the local service listens on loopback only (use 127.0.0.1, ::1 or localhost)"
        )

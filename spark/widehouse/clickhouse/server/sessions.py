"""HTTP sessions (``session_id``): the current database and settings a client's ``USE``/``SET`` left.

A session is not tied to an engine handle: its state is re-applied to whichever handle serves the
next request. Temporary tables are per handle: they are dropped when the request that created them
returns its handle to the pool, so they never outlive a request (nor shadow a table later). As in
ClickHouse, a session serves one request at a time and expires after ``session_timeout`` seconds
(default 60, at most 3600) without requests.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from widehouse.clickhouse.server.protocol import QueryError

DEFAULT_TIMEOUT = 60.0
MAX_TIMEOUT = 3600.0


@dataclass
class Session:
    """The state one client keeps between its requests."""

    session_id: str
    timeout: float
    database: str | None = None
    settings: dict[str, str] = field(default_factory=dict)
    last_used: float = field(default_factory=time.monotonic)
    busy: bool = False


class SessionStore:
    """The open sessions of the service."""

    def __init__(self) -> None:
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()

    @contextmanager
    def use(self, session_id: str, timeout: float | None, check: bool, close: bool) -> Iterator[Session]:
        """Session ``session_id`` for one request (created unless ``check``), closed after if ``close``."""
        seconds = DEFAULT_TIMEOUT if timeout is None else timeout
        if not 0 < seconds <= MAX_TIMEOUT:
            raise QueryError.of(
                "INVALID_SESSION_TIMEOUT", f"Session timeout {seconds} is not in (0, {MAX_TIMEOUT:.0f}]"
            )
        session = self._acquire(session_id, seconds, check)
        try:
            yield session
        finally:
            with self._lock:
                session.busy = False
                session.last_used = time.monotonic()
                if close:
                    self._sessions.pop(session_id, None)

    def _acquire(self, session_id: str, timeout: float, check: bool) -> Session:
        now = time.monotonic()
        with self._lock:
            for key, old in list(self._sessions.items()):
                if not old.busy and now - old.last_used > old.timeout:
                    del self._sessions[key]
            session = self._sessions.get(session_id)
            if session is None:
                if check:
                    raise QueryError.of("SESSION_NOT_FOUND", f"Session {session_id} not found")
                session = self._sessions[session_id] = Session(session_id, timeout)
            if session.busy:
                raise QueryError.of(
                    "SESSION_IS_LOCKED", f"Session {session_id} is locked by a concurrent client"
                )
            session.busy = True
            session.timeout = timeout
            return session

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)

"""A pool of chDB connection handles on one data directory, each with per-request state.

chDB hosts one engine per process and data path. A handle runs one statement at a time (and none
while it has an open streaming insert), while several handles run in parallel: the pool lends one
handle per request. Settings and the current database are per handle, so before each request the
handle is brought to the state the request asks for with one ``SET`` (only what differs from its
last request) and a ``USE``; async inserts are switched off for good (they ignore deduplication
tokens and would acknowledge data before it is written).
"""

from __future__ import annotations

import json
import logging
import queue
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from widehouse.clickhouse.server.protocol import QueryError
from widehouse.errors import ClickHouseError

log = logging.getLogger(__name__)

FORCED_SETTINGS = {"async_insert": "0"}
"""Settings every handle keeps whatever a request asks for."""
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_UNTRACKED = frozenset({"use_query_cache", "database"})
_CAPTURE_SQL = (
    "SELECT name, value, currentDatabase() AS db FROM system.settings WHERE changed "
    "SETTINGS use_query_cache = 0 FORMAT JSONEachRow"
)


@dataclass(frozen=True)
class Outcome:
    """What one statement produced: the result bytes and its statistics."""

    data: bytes
    read_rows: int = 0
    read_bytes: int = 0
    written_rows: int = 0
    written_bytes: int = 0
    elapsed: float = 0.0


def quote(value: str) -> str:
    """A SQL string literal."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def quote_identifier(name: str) -> str:
    return "`" + name.replace("\\", "\\\\").replace("`", "\\`") + "`"


class Handle:
    """One chDB connection with the settings and database it currently has.

    ``connect`` opens a fresh connection: used when one cannot be brought back to its baseline
    (e.g. after a request set ``readonly``).
    """

    def __init__(self, connect: Callable[[], Any], defaults: Mapping[str, str] | None = None) -> None:
        self._connect = connect
        self._defaults = {**(defaults or {}), **FORCED_SETTINGS}
        self.broken = False
        self.scratch = False
        self._open()

    def _open(self) -> None:
        self.conn = self._connect()
        self.database = "default"
        self.applied: dict[str, str] = {}
        self._run(f"SET {', '.join(f'{k} = {quote(v)}' for k, v in self._defaults.items())}")
        self.baseline = {row["name"]: row["value"] for row in self._changed()}

    def reopen(self) -> None:
        """Replace the connection by a fresh one (baseline settings, database ``default``).

        If that fails the handle stays ``broken`` (the pool retries before lending it again) and the
        error propagates.
        """
        log.info("replacing a chDB handle that cannot be reset")
        self.broken = True
        _close_conn(self.conn)
        try:
            self._open()
        except QueryError:
            raise
        except Exception as exc:  # chDB raises RuntimeError when the engine cannot open a connection
            raise QueryError.of("CANNOT_SCHEDULE_TASK", f"Cannot reopen an engine handle: {exc}") from exc
        self.broken = False
        self.scratch = False

    def drop_temporary_tables(self) -> None:
        """Drop the temporary tables a request created (they would shadow tables for later requests)."""
        self.scratch = False
        rows = self._run(
            "SELECT name FROM system.tables WHERE is_temporary SETTINGS use_query_cache = 0",
            "TabSeparatedRaw",
        )
        for name in rows.data.decode().splitlines():
            if name:
                self._run(f"DROP TEMPORARY TABLE IF EXISTS {quote_identifier(name)}")

    # -- state -------------------------------------------------------------------------------------
    def prepare(self, database: str, settings: Mapping[str, str]) -> None:
        """Bring the handle to ``settings`` (on top of its baseline) and ``database``."""
        wanted = {k: v for k, v in settings.items() if k not in FORCED_SETTINGS}
        for name in wanted:
            if not _NAME_RE.match(name):
                raise QueryError.of("UNKNOWN_SETTING", f"Unknown setting '{name}'")
        stale = [k for k in self.applied if k not in wanted]
        if stale:
            try:
                self._run("SET " + ", ".join(f"{k} = {self._reset_literal(k)}" for k in stale))
                self.applied = {k: v for k, v in self.applied.items() if k in wanted}
            except QueryError:
                self.reopen()
        changes = [f"{k} = {quote(v)}" for k, v in wanted.items() if self.applied.get(k) != v]
        if changes:
            try:
                self._run("SET " + ", ".join(changes))
            except QueryError:  # part of it may have been applied: start from a clean connection
                self.reopen()
                raise
            self.applied = wanted
        if database != self.database:
            self._run(f"USE {quote_identifier(database)}")
            self.database = database

    def capture(self) -> tuple[str, dict[str, str]]:
        """Read back the database and settings after a user's ``SET``/``USE`` (kept for its session)."""
        rows = self._changed()
        current = {r["name"]: r["value"] for r in rows}
        settings = {k: v for k, v in current.items() if self.baseline.get(k) != v and k not in _UNTRACKED}
        if "use_query_cache" in self.applied:  # the capture query sets it itself
            settings["use_query_cache"] = self.applied["use_query_cache"]
        if any(current.get(k) != v for k, v in FORCED_SETTINGS.items()):
            self._run(f"SET {', '.join(f'{k} = {quote(v)}' for k, v in FORCED_SETTINGS.items())}")
        for name in FORCED_SETTINGS:
            settings.pop(name, None)
        self.applied = settings
        self.database = rows[0]["db"]
        return self.database, dict(settings)

    def _reset_literal(self, name: str) -> str:
        return quote(self.baseline[name]) if name in self.baseline else "DEFAULT"

    def _changed(self) -> list[dict[str, str]]:
        text = self._run(_CAPTURE_SQL).data.decode()
        return [json.loads(line) for line in text.splitlines() if line]

    # -- statements --------------------------------------------------------------------------------
    def query(self, sql: bytes, fmt: str, params: Mapping[str, str]) -> Outcome:
        """Run one statement; the result comes back whole, in ``fmt`` unless the SQL names a FORMAT."""
        return self._run(sql, fmt, params)

    def insert(self, statement: str, fmt: str, data: Iterable[bytes]) -> Outcome:
        """Stream ``data`` (``fmt``-encoded) into ``statement`` (an INSERT without FORMAT clause)."""
        started = time.perf_counter()
        try:
            inserter = self.conn.send_insert(statement, fmt)
        except Exception as exc:  # chDB raises RuntimeError with ClickHouse's message
            raise QueryError.from_engine(exc) from exc
        try:
            for chunk in data:
                inserter.append(chunk)
            result = inserter.finish()
        except BaseException as exc:
            self.broken = True  # as after a failed query (see _run)
            self._cancel(inserter)
            if isinstance(exc, QueryError | GeneratorExit | KeyboardInterrupt | SystemExit):
                raise
            raise QueryError.from_engine(exc) from exc
        return Outcome(
            b"",
            written_rows=int(result.rows_written),
            written_bytes=int(result.bytes_written),
            elapsed=time.perf_counter() - started,
        )

    def _cancel(self, inserter: Any) -> None:
        try:
            inserter.cancel()
        except Exception:  # a handle whose insert cannot be cancelled is not reused
            log.warning("cannot cancel a failed chDB insert; replacing the handle", exc_info=True)
            self.broken = True

    def _run(
        self, sql: str | bytes, fmt: str = "TabSeparated", params: Mapping[str, str] | None = None
    ) -> Outcome:
        try:
            result = self.conn.query(sql, fmt, params=dict(params or {}))
        except Exception as exc:  # chDB raises ChdbError/RuntimeError with ClickHouse's message
            # chDB keeps the output a failed statement produced before it failed and prepends it to
            # the next result on this connection: the handle is replaced before it is lent again
            self.broken = True
            raise QueryError.from_engine(exc) from exc
        return Outcome(
            result.bytes() or b"",
            read_rows=result.rows_read(),
            read_bytes=result.bytes_read(),
            written_rows=result.rows_written(),
            written_bytes=result.bytes_written(),
            elapsed=result.elapsed(),
        )


class EnginePool:
    """``size`` handles on the chDB engine at ``data_dir``, lent one request at a time.

    Every handle starts from ``defaults`` (the service's per-query caps) plus :data:`FORCED_SETTINGS`.
    A request waits at most ``acquire_timeout`` seconds for a free handle. A handle that cannot be
    brought back to a clean state is reopened; if that fails it stays in the pool marked broken and is
    reopened again before it is next lent, so the pool keeps its size and never lends a dead handle.
    """

    def __init__(
        self,
        data_dir: Path,
        size: int,
        defaults: Mapping[str, str] | None = None,
        acquire_timeout: float | None = None,
    ) -> None:
        import chdb

        self._chdb = chdb
        self.data_dir = data_dir
        self.defaults = dict(defaults or {})
        self.acquire_timeout = acquire_timeout
        self._free: queue.LifoQueue[Handle] = queue.LifoQueue()
        self._all: list[Handle] = []
        self._lock = threading.Lock()
        data_dir.mkdir(parents=True, exist_ok=True)
        try:
            for _ in range(size):
                handle = self._open()
                self._all.append(handle)
                self._free.put(handle)
        except BaseException:
            self.close()
            raise
        info = (
            self._all[0].query(b"SELECT version(), timezone()", "TabSeparated", {}).data.decode().split("\t")
        )
        self.version, self.timezone = info[0].strip(), info[1].strip()

    def _open(self) -> Handle:
        try:
            return Handle(lambda: self._chdb.connect(str(self.data_dir)), self.defaults)
        except QueryError:
            raise
        except Exception as exc:  # chDB raises RuntimeError when the path is locked or unusable
            raise ClickHouseError(
                f"cannot open the chDB engine on {self.data_dir}: {exc}. chDB lets one process hold a data "
                "directory at a time: is another service, Widehouse process or test using it?"
            ) from exc

    @contextmanager
    def handle(self) -> Iterator[Handle]:
        """Borrow a handle (waiting up to ``acquire_timeout``); its temporary tables go when it returns."""
        try:
            handle = self._free.get(timeout=self.acquire_timeout)
        except queue.Empty:
            raise QueryError.of(
                "TOO_MANY_SIMULTANEOUS_QUERIES",
                f"All {len(self._all)} engine handles stayed busy for {self.acquire_timeout:g} s "
                "(--handles, --acquire-timeout); retry later",
            ) from None
        if handle.broken:
            try:
                handle.reopen()
            except BaseException:
                self._free.put(handle)
                raise
        try:
            yield handle
        finally:
            self._release(handle)

    def _release(self, handle: Handle) -> None:
        try:
            if not handle.broken and handle.scratch:
                handle.drop_temporary_tables()
        except QueryError:
            log.warning("cannot drop a request's temporary tables; replacing the handle", exc_info=True)
            handle.broken = True
        if handle.broken:
            try:
                handle.reopen()
            except QueryError:  # stays broken: reopened again before it is next lent
                log.warning("cannot reopen a chDB handle; will retry before lending it", exc_info=True)
        self._free.put(handle)

    def close(self, timeout: float = 30.0) -> None:
        """Close every handle (waiting up to ``timeout`` s for borrowed ones); the engine then stops."""
        deadline = time.monotonic() + timeout
        returned = 0
        with self._lock:
            total = len(self._all)
        while returned < total:
            try:
                handle = self._free.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                log.warning("closing the chDB engine with %d handle(s) still busy", total - returned)
                break
            _close_conn(handle.conn)
            returned += 1
        with self._lock:
            self._all.clear()


def _close_conn(conn: Any) -> None:
    try:
        conn.close()
    except Exception:  # closing is best effort: the engine stops with its last handle anyway
        log.warning("error closing a chDB handle", exc_info=True)

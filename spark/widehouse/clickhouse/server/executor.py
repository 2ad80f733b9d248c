"""One HTTP request, ClickHouse's way: authenticate, route, run on a pooled handle, shape the reply.

The request is authenticated from its URL and headers before any of its body is read. The SQL is
the ``query`` parameter, a newline, then the body, as in ClickHouse. An ``INSERT ... FORMAT <name>``
streams the data that follows it into the engine chunk by chunk (Native blocks, an Arrow file,
TSV...); any other statement is read whole and run, its result returned whole (the service always
behaves as with ``wait_end_of_query=1``). Every statement passes :mod:`.guard` first (no host files,
URLs, programs or other servers; ``GET`` is read-only).
"""

from __future__ import annotations

import hmac
import itertools
import json
import logging
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from widehouse.clickhouse.server import codec, sql
from widehouse.clickhouse.server.config import ServerConfig
from widehouse.clickhouse.server.engine import EnginePool, Handle, Outcome
from widehouse.clickhouse.server.guard import Guard
from widehouse.clickhouse.server.protocol import (
    CODES,
    QueryError,
    RequestParams,
    credentials,
    error_body,
    form_fields,
    http_status,
    parse_request,
)
from widehouse.clickhouse.server.sessions import Session, SessionStore

log = logging.getLogger(__name__)

HEAD_LIMIT = 1 << 20
"""How much SQL is read to find where INSERT data starts (ClickHouse's max_query_size is 256 KiB)."""
FORM_LIMIT = 16 << 20
"""A ``multipart/form-data`` body (query and parameters as form fields) is read whole up to this size."""
_NO_EXPRESSIONS = {
    "input_format_values_interpret_expressions": "0",
    "input_format_values_deduce_templates_of_expressions": "0",
}
"""Settings of a streamed ``FORMAT Values`` insert: its rows are literals, never expressions to run."""
_ENGINE_ONLY_FORMATS = frozenset({"dataframe", "datastore", "arrowtable"})
_CONTENT_TYPES = {
    "TabSeparated": "text/tab-separated-values; charset=UTF-8",
    "TSV": "text/tab-separated-values; charset=UTF-8",
    "CSV": "text/csv; charset=UTF-8; header=absent",
    "JSON": "application/json; charset=UTF-8",
    "JSONEachRow": "application/x-ndjson; charset=UTF-8",
}


@dataclass
class Request:
    """A parsed HTTP request line and headers, with its body still unread."""

    method: str
    path: str
    pairs: list[tuple[str, str]]
    headers: Mapping[str, str]
    body: codec.Body
    authenticated: bool = False
    started: float = field(default_factory=time.monotonic)


@dataclass
class Reply:
    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


class Executor:
    """Answers requests for one service (its config, engine pool and sessions)."""

    def __init__(self, config: ServerConfig, pool: EnginePool, sessions: SessionStore) -> None:
        self.config = config
        self.pool = pool
        self.sessions = sessions
        with pool.handle() as handle:
            rows = handle.query(
                b"SELECT name, value FROM system.settings "
                b"WHERE name IN ('enable_http_compression', 'http_zlib_compression_level')",
                "TabSeparated",
                {},
            )
            catalog = handle.query(
                b"SELECT name FROM system.table_functions UNION ALL SELECT name FROM system.table_engines",
                "TabSeparatedRaw",
                {},
            )
        self.defaults = dict(line.split("\t", 1) for line in rows.data.decode().splitlines())
        caps = {"max_execution_time": config.max_execution_time, "max_memory_usage": config.max_memory_usage}
        self.guard = Guard(catalog.data.decode().splitlines(), caps)

    def reply(self, request: Request) -> Reply:
        """The reply to ``request``; never raises for a bad request."""
        query_id = str(uuid.uuid4())
        try:
            if request.path in ("/ping", "/replicas_status") or (
                request.path == "/"
                and request.method == "GET"
                and not any(k == "query" for k, _ in request.pairs)
            ):
                return Reply(200, b"Ok.\n", {"Content-Type": "text/html; charset=UTF-8"})
            if request.path != "/":
                text = f"There is no handle {request.path}\n\nUse / or /ping for health checks.\n"
                return Reply(404, text.encode(), {"Content-Type": "text/plain; charset=UTF-8"})
            self._authenticate(request.headers, parse_request(request.pairs, request.headers))
            request.authenticated = True
            pairs, chunks = self._form(request)
            params = parse_request(pairs, request.headers)
            query_id = params.query_id or query_id
            if params.native_compress:
                raise QueryError.of(
                    "NOT_IMPLEMENTED",
                    "ClickHouse's native block compression (compress/decompress=1) is not supported by this "
                    "service; use Content-Encoding and Accept-Encoding",
                )
            if params.session_id is None:
                return self._run(request, params, chunks, None, query_id)
            with self.sessions.use(
                params.session_id, params.session_timeout, params.session_check, params.close_session
            ) as session:
                return self._run(request, params, chunks, session, query_id)
        except QueryError as exc:
            if exc.code == CODES["TIMEOUT_EXCEEDED"]:  # a slow sender is not waited for again
                request.body.abandon()
            return self.error_reply(exc, query_id)
        except Exception as exc:  # a bug or an unexpected engine failure must not kill the service
            log.exception("unexpected error serving query %s", query_id)
            return self.error_reply(
                QueryError.of("UNKNOWN_EXCEPTION", f"Unexpected error: {exc!r}"), query_id
            )

    def error_reply(self, error: QueryError, query_id: str | None = None) -> Reply:
        headers = {
            "Content-Type": "text/plain; charset=UTF-8",
            "X-ClickHouse-Exception-Code": str(error.code),
        }
        if query_id:
            headers["X-ClickHouse-Query-Id"] = query_id
        return Reply(http_status(error.code), error_body(error, self.pool.version), headers)

    # -- steps ----------------------------------------------------------------------------------------
    def _form(self, request: Request) -> tuple[list[tuple[str, str]], Iterator[bytes]]:
        """URL parameters (plus form fields for a multipart body) and the decoded body chunks."""
        encoding = request.headers.get("Content-Encoding")
        chunks = codec.decoded(request.body.chunks(), encoding, self.config.max_body_bytes)
        content_type = request.headers.get("Content-Type", "")
        if not content_type.lower().startswith("multipart/form-data"):
            return list(request.pairs), chunks
        limit = min(FORM_LIMIT, self.config.max_body_bytes)
        form = _read_rest(chunks, self._deadline(request), limit, "form body")
        fields = form_fields(form, content_type)
        return [*request.pairs, *fields], iter(())

    def _deadline(self, request: Request) -> float:
        return request.started + self.config.head_timeout

    def _authenticate(self, headers: Mapping[str, str], params: RequestParams) -> None:
        user, password = credentials(headers, params)
        user_ok = hmac.compare_digest(user.encode(), self.config.user.encode())
        password_ok = hmac.compare_digest(password.encode(), self.config.password.encode())
        if not (user_ok and password_ok):
            raise QueryError.of(
                "AUTHENTICATION_FAILED",
                f"{user}: Authentication failed: password is incorrect, or there is no user with such name",
            )

    def _run(
        self,
        request: Request,
        params: RequestParams,
        chunks: Iterator[bytes],
        session: Session | None,
        query_id: str,
    ) -> Reply:
        settings = {**session.settings, **params.settings} if session else dict(params.settings)
        database = params.database or (session.database if session else None) or "default"
        fmt = params.default_format or "TabSeparated"
        if fmt.lower() in _ENGINE_ONLY_FORMATS:
            raise QueryError.of("UNKNOWN_FORMAT", f"Unknown output format {fmt}")
        head = bytearray(params.query.encode() + (b"\n" if params.query else b""))
        deadline = self._deadline(request)
        self.guard.check_settings(params.settings)
        split, chunks = _read_head(head, chunks, deadline)
        if not head.strip():
            raise QueryError.of("SYNTAX_ERROR", "Empty query")
        if isinstance(split, sql.InsertSplit) and split.fmt.lower() == "values":
            settings = {**settings, **_NO_EXPRESSIONS}
        with self.pool.handle() as handle:
            handle.prepare(database, settings)
            if isinstance(split, sql.InsertSplit):
                statement = f"{split.statement} FORMAT {split.fmt}".encode()
                self.guard.check(handle, statement, params.params, request.method)
                data = itertools.chain([bytes(head[split.data_start :])], chunks)
                outcome = handle.insert(split.statement, split.fmt, (c for c in data if c))
                return self._success(outcome, None, request, settings, query_id)
            text = bytes(head) + _read_rest(chunks, deadline, self.config.max_body_bytes, "query")
            values_at = sql.values_start(text)
            if values_at is not None:  # streamed as Values data: it cannot hold a second statement
                statement = text[:values_at].rstrip()
                self.guard.check(handle, statement + b" FORMAT Values", params.params, request.method)
                self.guard.check_values(handle, text[values_at + 6 :])
                outcome = handle.insert(statement.decode(), "Values", [text[values_at + 6 :]])
                return self._success(outcome, None, request, settings, query_id)
            verdict = self.guard.check(handle, text, params.params, request.method)
            if verdict.inline_data:  # its data was not found where the router looks: never run it as SQL
                raise QueryError.of(
                    "SYNTAX_ERROR",
                    "Cannot tell where this INSERT's data starts; send it after FORMAT <name> on a new line",
                )
            if verdict.kind == "CreateQuery":  # may be CREATE TEMPORARY TABLE: dropped when returned
                handle.scratch = True
            keyword = sql.first_keyword(text)
            before = dict(handle.applied)
            outcome = handle.query(text, fmt, params.params)
            if keyword in sql.SESSION_KEYWORDS:
                _keep_session_state(handle, before, keyword, session)
        result_format = sql.trailing_format(text) or (fmt if keyword in sql.RESULT_KEYWORDS else None)
        return self._success(outcome, result_format, request, settings, query_id)

    def _success(
        self,
        outcome: Outcome,
        result_format: str | None,
        request: Request,
        settings: Mapping[str, str],
        query_id: str,
    ) -> Reply:
        summary = {
            "read_rows": str(outcome.read_rows),
            "read_bytes": str(outcome.read_bytes),
            "written_rows": str(outcome.written_rows),
            "written_bytes": str(outcome.written_bytes),
            "total_rows_to_read": "0",
            "result_bytes": str(len(outcome.data)),
            "elapsed_ns": str(int(outcome.elapsed * 1e9)),
        }
        headers = {
            "X-ClickHouse-Query-Id": query_id,
            "X-ClickHouse-Timezone": self.pool.timezone,
            "X-ClickHouse-Summary": json.dumps(summary, separators=(",", ":")),
            "Content-Type": "text/plain; charset=UTF-8",
        }
        if result_format is not None:
            headers["X-ClickHouse-Format"] = result_format
            headers["Content-Type"] = _CONTENT_TYPES.get(result_format, "application/octet-stream")
        body = outcome.data
        enabled = settings.get("enable_http_compression", self.defaults.get("enable_http_compression", "0"))
        encoding = codec.reply_encoding(request.headers.get("Accept-Encoding"))
        if body and encoding and enabled.lower() not in ("0", "false"):
            level = settings.get(
                "http_zlib_compression_level", self.defaults.get("http_zlib_compression_level", "3")
            )
            body = codec.compress(body, encoding, int(level) if level.isdigit() else 3)
            headers["Content-Encoding"] = encoding
        return Reply(200, body, headers)


def _read_head(
    head: bytearray, chunks: Iterator[bytes], deadline: float
) -> tuple[sql.InsertSplit | None, Iterator[bytes]]:
    """Read body chunks into ``head`` until it is known whether (and where) INSERT data starts.

    The head is scanned again only once it has doubled (or the body ended), so the work stays linear
    in its size however small the pieces the client sends; it must arrive before ``deadline``.
    """
    complete = False
    next_scan = 0
    while True:
        if complete or len(head) >= next_scan or len(head) > HEAD_LIMIT:
            split = sql.split_insert(bytes(head), complete)
            if split != sql.NEED_MORE:
                return (split if isinstance(split, sql.InsertSplit) else None), chunks
            if len(head) > HEAD_LIMIT:
                return None, chunks
            next_scan = max(2 * len(head), 1024)
        if time.monotonic() > deadline:
            raise _too_slow("query")
        chunk = next(chunks, None)
        if chunk is None:
            complete = True
        else:
            head += chunk


def _read_rest(chunks: Iterator[bytes], deadline: float, limit: int, what: str) -> bytes:
    """The rest of the body, which must arrive before ``deadline`` and stay within ``limit`` bytes."""
    out = bytearray()
    for chunk in chunks:
        out += chunk
        if len(out) > limit:
            raise codec.BodyTooLargeError(limit)
        if time.monotonic() > deadline:
            raise _too_slow(what)
    return bytes(out)


def _too_slow(what: str) -> QueryError:
    return QueryError.of(
        "TIMEOUT_EXCEEDED", f"The {what} did not arrive in time: the client sends too slowly (--head-timeout)"
    )


def _keep_session_state(
    handle: Handle, before: Mapping[str, str], keyword: str, session: Session | None
) -> None:
    """After a user's SET or USE: track the handle's new state and keep it in the session."""
    database, after = handle.capture()
    if session is None:
        return
    for name in before.keys() | after.keys():
        if before.get(name) == after.get(name):
            continue
        if name in after:
            session.settings[name] = after[name]
        else:
            session.settings.pop(name, None)
    if keyword == "USE":
        session.database = database

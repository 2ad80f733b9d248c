"""One HTTP request, ClickHouse's way: authenticate, route, run on a pooled handle, shape the reply.

The SQL is the ``query`` parameter, a newline, then the body, as in ClickHouse. An
``INSERT ... FORMAT <name>`` streams the data that follows it into the engine chunk by chunk (Native
blocks, an Arrow file, TSV...); any other statement is read whole and run, its result returned whole
(the service always behaves as with ``wait_end_of_query=1``).
"""

from __future__ import annotations

import hmac
import itertools
import json
import logging
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from widehouse.clickhouse.server import codec, sql
from widehouse.clickhouse.server.config import ServerConfig
from widehouse.clickhouse.server.engine import EnginePool, Handle, Outcome
from widehouse.clickhouse.server.protocol import (
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
        self.defaults = dict(line.split("\t", 1) for line in rows.data.decode().splitlines())

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
            pairs, chunks = self._form(request)
            params = parse_request(pairs, request.headers)
            query_id = params.query_id or query_id
            self._authenticate(request.headers, params)
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
        fields = form_fields(b"".join(chunks), content_type)
        return [*request.pairs, *fields], iter(())

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
        split, chunks = _read_head(head, chunks)
        if not head.strip():
            raise QueryError.of("SYNTAX_ERROR", "Empty query")
        with self.pool.handle() as handle:
            handle.prepare(database, settings)
            if isinstance(split, sql.InsertSplit):
                data = itertools.chain([bytes(head[split.data_start :])], chunks)
                outcome = handle.insert(split.statement, split.fmt, (c for c in data if c))
                return self._success(outcome, None, request, settings, query_id)
            text = bytes(head) + b"".join(chunks)
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


def _read_head(head: bytearray, chunks: Iterator[bytes]) -> tuple[sql.InsertSplit | None, Iterator[bytes]]:
    """Read body chunks into ``head`` until it is known whether (and where) INSERT data starts."""
    complete = False
    while True:
        split = sql.split_insert(bytes(head), complete)
        if split != sql.NEED_MORE:
            return (split if isinstance(split, sql.InsertSplit) else None), chunks
        if len(head) > HEAD_LIMIT:
            return None, chunks
        chunk = next(chunks, None)
        if chunk is None:
            complete = True
        else:
            head += chunk


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

"""ClickHouse's HTTP interface, the parts a request and a reply are made of.

- errors: :class:`QueryError` carries a ClickHouse error code; :func:`error_body` renders it the way
  a ClickHouse server does (``Code: N. DB::Exception: ... (NAME) (version V)``) and
  :func:`http_status` picks the status ClickHouse would send (its ``exceptionCodeToHTTPStatus``);
- :func:`parse_request` splits URL (or multipart form) parameters into transport parameters,
  engine settings and ``param_*`` query parameters;
- :func:`credentials` reads the user and password the ways ClickHouse accepts them.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from email.parser import BytesParser

from widehouse.errors import ClickHouseError

# The error codes this service raises itself or maps to an HTTP status (names as in ClickHouse).
CODES = {
    "CANNOT_PARSE_TEXT": 6,
    "THERE_IS_NO_COLUMN": 8,
    "DUPLICATE_COLUMN": 15,
    "CANNOT_PARSE_ESCAPE_SEQUENCE": 25,
    "CANNOT_PARSE_QUOTED_STRING": 26,
    "CANNOT_PARSE_INPUT_ASSERTION_FAILED": 27,
    "CANNOT_READ_ALL_DATA": 33,
    "BAD_ARGUMENTS": 36,
    "UNKNOWN_ELEMENT_IN_AST": 37,
    "CANNOT_PARSE_DATE": 38,
    "CANNOT_PARSE_DATETIME": 41,
    "ILLEGAL_COLUMN": 44,
    "UNKNOWN_FUNCTION": 46,
    "UNKNOWN_IDENTIFIER": 47,
    "NOT_IMPLEMENTED": 48,
    "UNKNOWN_TYPE": 50,
    "TYPE_MISMATCH": 53,
    "UNKNOWN_STORAGE": 56,
    "UNKNOWN_TABLE": 60,
    "SYNTAX_ERROR": 62,
    "UNKNOWN_AGGREGATE_FUNCTION": 63,
    "CANNOT_PARSE_NUMBER": 72,
    "UNKNOWN_FORMAT": 73,
    "CANNOT_OPEN_FILE": 76,
    "UNKNOWN_TYPE_OF_QUERY": 78,
    "UNKNOWN_DATABASE": 81,
    "UNKNOWN_COMPRESSION_METHOD": 89,
    "UNKNOWN_SETTING": 115,
    "INCORRECT_DATA": 117,
    "UNKNOWN_TYPE_OF_AST_NODE": 123,
    "UNKNOWN_DIRECTION_OF_SORTING": 152,
    "TIMEOUT_EXCEEDED": 159,
    "READONLY": 164,
    "TOO_DEEP_AST": 167,
    "TOO_BIG_AST": 168,
    "UNKNOWN_USER": 192,
    "WRONG_PASSWORD": 193,
    "REQUIRED_PASSWORD": 194,
    "TOO_MANY_SIMULTANEOUS_QUERIES": 202,
    "SOCKET_TIMEOUT": 209,
    "UNEXPECTED_AST_STRUCTURE": 223,
    "QUERY_IS_TOO_LARGE": 229,
    "CANNOT_DECOMPRESS": 271,
    "VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE": 321,
    "UNKNOWN_DATABASE_ENGINE": 336,
    "SESSION_NOT_FOUND": 372,
    "SESSION_IS_LOCKED": 373,
    "INVALID_SESSION_TIMEOUT": 374,
    "CANNOT_PARSE_UUID": 376,
    "HTTP_LENGTH_REQUIRED": 381,
    "CANNOT_COMPILE_REGEXP": 427,
    "CANNOT_SCHEDULE_TASK": 439,
    "SETTING_CONSTRAINT_VIOLATION": 452,
    "CANNOT_PARSE_DOMAIN_VALUE_FROM_STRING": 441,
    "ACCESS_DENIED": 497,
    "UNKNOWN_ROLE": 511,
    "SET_NON_GRANTED_ROLE": 512,
    "AUTHENTICATION_FAILED": 516,
    "CANNOT_PARSE_IPV4": 675,
    "CANNOT_PARSE_IPV6": 676,
    "UNSUPPORTED_MEDIA_TYPE": 779,
    "UNKNOWN_EXCEPTION": 1002,
}

# ClickHouse's src/Server/HTTP/exceptionCodeToHTTPStatus.cpp; everything else is 500.
_STATUS_GROUPS: tuple[tuple[int, tuple[str, ...]], ...] = (
    (401, ("REQUIRED_PASSWORD",)),
    (403, ("UNKNOWN_USER", "WRONG_PASSWORD", "AUTHENTICATION_FAILED", "SET_NON_GRANTED_ROLE",
           "ACCESS_DENIED", "READONLY")),
    (
        400,
        (
            "BAD_ARGUMENTS", "CANNOT_COMPILE_REGEXP", "CANNOT_PARSE_TEXT", "CANNOT_PARSE_ESCAPE_SEQUENCE",
            "CANNOT_PARSE_QUOTED_STRING", "CANNOT_PARSE_DATE", "CANNOT_PARSE_DATETIME", "CANNOT_PARSE_NUMBER",
            "CANNOT_PARSE_DOMAIN_VALUE_FROM_STRING", "CANNOT_PARSE_IPV4", "CANNOT_PARSE_IPV6",
            "CANNOT_PARSE_INPUT_ASSERTION_FAILED", "CANNOT_PARSE_UUID", "DUPLICATE_COLUMN", "ILLEGAL_COLUMN",
            "UNKNOWN_ELEMENT_IN_AST", "UNKNOWN_TYPE_OF_AST_NODE", "THERE_IS_NO_COLUMN", "TOO_DEEP_AST",
            "TOO_BIG_AST", "UNEXPECTED_AST_STRUCTURE", "SYNTAX_ERROR", "INCORRECT_DATA", "TYPE_MISMATCH",
            "VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE",
        ),
    ),
    (
        404,
        (
            "UNKNOWN_TABLE", "UNKNOWN_FUNCTION", "UNKNOWN_IDENTIFIER", "UNKNOWN_TYPE", "UNKNOWN_STORAGE",
            "UNKNOWN_DATABASE", "UNKNOWN_SETTING", "UNKNOWN_DIRECTION_OF_SORTING",
            "UNKNOWN_AGGREGATE_FUNCTION", "UNKNOWN_FORMAT", "UNKNOWN_DATABASE_ENGINE",
            "UNKNOWN_TYPE_OF_QUERY",
            "UNKNOWN_ROLE",
        ),
    ),
    (413, ("QUERY_IS_TOO_LARGE",)),
    (501, ("NOT_IMPLEMENTED",)),
    (503, ("SOCKET_TIMEOUT", "CANNOT_OPEN_FILE", "CANNOT_SCHEDULE_TASK", "TOO_MANY_SIMULTANEOUS_QUERIES")),
    (411, ("HTTP_LENGTH_REQUIRED",)),
    (408, ("TIMEOUT_EXCEEDED",)),
    (415, ("UNSUPPORTED_MEDIA_TYPE",)),
)  # fmt: skip
_STATUS = {CODES[name]: status for status, names in _STATUS_GROUPS for name in names}

_CODE_RE = re.compile(r"Code: (\d+)\. ")


class QueryError(ClickHouseError):
    """A request failed with ClickHouse error ``code``; ``text`` reads ``Code: N. DB::Exception: ...``."""

    def __init__(self, code: int, text: str) -> None:
        super().__init__(text)
        self.code = code
        self.text = text

    @classmethod
    def of(cls, name: str, message: str) -> QueryError:
        """An error raised by this service: ``name`` is a ClickHouse error name from :data:`CODES`."""
        code = CODES[name]
        return cls(code, f"Code: {code}. DB::Exception: {message}. ({name})")

    @classmethod
    def from_engine(cls, exc: BaseException) -> QueryError:
        """The engine's error (chDB puts ClickHouse's own message in the exception text)."""
        text = str(exc)
        start = text.find("Code: ")
        match = _CODE_RE.match(text, start) if start >= 0 else None
        if match is None:
            return cls(
                CODES["UNKNOWN_EXCEPTION"], f"Code: 1002. DB::Exception: {text.strip()}. (UNKNOWN_EXCEPTION)"
            )
        return cls(int(match.group(1)), text[start:].strip())


def http_status(code: int) -> int:
    """The HTTP status a ClickHouse server answers an error ``code`` with."""
    return _STATUS.get(code, 500)


def error_body(error: QueryError, version: str) -> bytes:
    """The reply body of a failed request, with ClickHouse's version trailer."""
    text = error.text if "(version " in error.text else f"{error.text} (version {version})"
    return (text + "\n").encode()


# -------------------------------------------------------------------------------- headers
class Headers(Mapping[str, str]):
    """Request headers, looked up by name in any case (the last value of a repeated header wins)."""

    def __init__(self, items: Iterable[tuple[str, str]]) -> None:
        self._items = {name.lower(): value for name, value in items}

    def __getitem__(self, name: str) -> str:
        return self._items[name.lower()]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)


# -------------------------------------------------------------------------------- parameters
# URL parameters ClickHouse's HTTP handler consumes itself; every other one is an engine setting.
TRANSPORT_PARAMS = frozenset(
    {
        "query", "compress", "decompress", "user", "password", "quota_key", "query_id", "stacktrace", "role",
        "buffer_size", "wait_end_of_query", "session_id", "session_timeout", "session_check",
        "client_protocol_version", "close_session", "database", "default_format", "with_stacktrace",
    }
)  # fmt: skip
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class RequestParams:
    """What a request asks for, besides its SQL body."""

    query: str = ""
    database: str | None = None
    default_format: str | None = None
    query_id: str | None = None
    session_id: str | None = None
    session_timeout: float | None = None
    session_check: bool = False
    close_session: bool = False
    native_compress: bool = False
    settings: dict[str, str] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)
    url_user: str | None = None
    url_password: str | None = None


def parse_request(pairs: Iterable[tuple[str, str]], headers: Mapping[str, str]) -> RequestParams:
    """Sort URL (or form) parameters into a :class:`RequestParams`; the last value of a name wins."""
    values: dict[str, str] = {}
    for name, value in pairs:
        values[name] = value
    settings: dict[str, str] = {}
    params: dict[str, str] = {}
    for name, value in values.items():
        if name.startswith("param_"):
            params[name[6:]] = value
        elif name not in TRANSPORT_PARAMS:
            if not _NAME_RE.match(name):
                raise QueryError.of("UNKNOWN_SETTING", f"Unknown setting '{name}'")
            settings[name] = value
    timeout = values.get("session_timeout")
    try:
        session_timeout = float(timeout) if timeout else None
    except ValueError as exc:
        raise QueryError.of("INVALID_SESSION_TIMEOUT", f"Invalid session timeout: '{timeout}'") from exc
    return RequestParams(
        query=values.get("query", ""),
        database=values.get("database") or headers.get("X-ClickHouse-Database") or None,
        default_format=values.get("default_format") or headers.get("X-ClickHouse-Format") or None,
        query_id=values.get("query_id") or None,
        session_id=values.get("session_id") or None,
        session_timeout=session_timeout,
        session_check=values.get("session_check", "0") not in ("", "0"),
        close_session=values.get("close_session", "0") not in ("", "0"),
        native_compress=any(values.get(name, "0") not in ("", "0") for name in ("compress", "decompress")),
        settings=settings,
        params=params,
        url_user=values.get("user"),
        url_password=values.get("password"),
    )


def form_fields(body: bytes, content_type: str) -> list[tuple[str, str]]:
    """The text fields of a ``multipart/form-data`` body (the query and ``param_*`` values).

    External data (file fields) is not supported: it raises ``NOT_IMPLEMENTED``.
    """
    message = BytesParser().parsebytes(
        b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + body
    )
    fields: list[tuple[str, str]] = []
    for part in message.walk():
        if part.is_multipart():
            continue
        name = part.get_param("name", header="content-disposition")
        if not isinstance(name, str):
            continue
        if part.get_filename() is not None:
            raise QueryError.of(
                "NOT_IMPLEMENTED", "External data (file fields) is not supported by this service"
            )
        payload = part.get_payload(decode=True)
        fields.append((name, payload.decode() if isinstance(payload, bytes) else ""))
    return fields


# -------------------------------------------------------------------------------- credentials
def credentials(headers: Mapping[str, str], request: RequestParams) -> tuple[str, str]:
    """The (user, password) of a request: basic auth, X-ClickHouse-User/Key headers or URL parameters.

    Like ClickHouse, one method per request, and ``default`` with no password when none is given.
    """
    authorization = headers.get("Authorization")
    header_user = headers.get("X-ClickHouse-User")
    header_key = headers.get("X-ClickHouse-Key")
    url_given = request.url_user is not None or request.url_password is not None
    methods = sum((authorization is not None, header_user is not None or header_key is not None, url_given))
    if methods > 1:
        raise QueryError.of(
            "AUTHENTICATION_FAILED",
            "Invalid authentication: it is not allowed to use more than one of the Authorization header, "
            "X-ClickHouse-User/X-ClickHouse-Key headers and user/password parameters at once",
        )
    if authorization is not None:
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "basic":
            raise QueryError.of("AUTHENTICATION_FAILED", f"Unsupported authentication scheme '{scheme}'")
        try:
            user, _, password = base64.b64decode(token.strip(), validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError) as exc:
            raise QueryError.of("AUTHENTICATION_FAILED", "Malformed basic authentication header") from exc
        return user or "default", password
    if header_user is not None or header_key is not None:
        return header_user or "default", header_key or ""
    return request.url_user or "default", request.url_password or ""

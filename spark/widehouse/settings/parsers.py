"""The parsers of the settings' values: each raises ValueError saying what is wrong.

Those of secrets never quote the value. Plain booleans, numbers and choices are read by
:mod:`widehouse.contracts.values` (the same text means the same value as in the source and sink
options and the CLI); the checks here are the settings' own (ports, URLs, hosts, paths, ...).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import re
from collections.abc import Callable
from pathlib import Path
from urllib.parse import SplitResult, unquote, urlsplit

from widehouse.contracts import periods, values
from widehouse.contracts.tables import check_cluster_name
from widehouse.settings.masking import _mask_spark_conf

STREAM_SINKS = ("clickhouse", "delta")
SUPERVISOR_MODES = ("local", "cluster")


_HEAP_RE = re.compile(r"[1-9][0-9]*[kKmMgG]")
_CONF_KEY_RE = re.compile(r"[A-Za-z0-9_.\-]+")
_HOSTNAME_RE = re.compile(r"[A-Za-z0-9_.\-]+")
_IDENTIFIER_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
_SPACE_OR_CONTROL_RE = re.compile(r"[\s\x00-\x1f\x7f]")
_URI_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]+:.+")
_SPARK_LOCAL_RE = re.compile(r"local(\[([1-9][0-9]*|\*)(\s*,\s*[0-9]+)?\])?")


def _finite(value: str) -> float:
    return values.parse_float(value)


def _parse_port(value: str) -> int:
    port = values.parse_int(value)
    if not 1 <= port <= 65535:
        raise ValueError("a port must be between 1 and 65535")
    return port


def _parse_hour(value: str) -> dt.datetime:
    try:
        return periods.parse_hour(value)
    except periods.PeriodError as exc:  # the resolver names the variable and the value
        raise ValueError(exc.problem) from exc


def _parse_heap(value: str) -> str:
    if not _HEAP_RE.fullmatch(value):
        raise ValueError("expected a JVM size such as 512m or 2g")
    return value.lower()


def _parse_positive_int(value: str) -> int:
    number = values.parse_int(value)
    if number <= 0:
        raise ValueError("must be a positive integer")
    return number


def _parse_non_negative_int(value: str) -> int:
    number = values.parse_int(value)
    if number < 0:
        raise ValueError("must be >= 0")
    return number


def _parse_positive_float(value: str) -> float:
    number = _finite(value)
    if number <= 0:
        raise ValueError("must be a positive number")
    return number


def _parse_non_negative_float(value: str) -> float:
    number = _finite(value)
    if number < 0:
        raise ValueError("must be a finite number >= 0")
    return number


def _parse_fraction(value: str) -> float:
    number = _finite(value)
    if not 0 < number <= 1:
        raise ValueError("must be a number in (0, 1]")
    return number


def _parse_bool(value: str) -> bool:
    try:
        return values.parse_bool(value)
    except values.ValueTextError:
        raise ValueError("expected true or false") from None


def _parse_app_id(value: str) -> str:
    if not re.fullmatch(r"[a-z][a-z0-9_-]{0,31}", value):
        raise ValueError("must be lowercase letters, digits, '-' or '_', starting with a letter (max 32)")
    return value


def _parse_tenant_suffix(value: str) -> str:
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,30}", value):
        raise ValueError("must be 1-31 lowercase letters, digits or '-'")
    return value


def _parse_identifier(value: str) -> str:
    if not _IDENTIFIER_RE.fullmatch(value):
        raise ValueError("must be a plain identifier (letters, digits, underscore)")
    return value


def _parse_clickhouse_cluster(value: str) -> str | None:
    if value.lower() == "none":
        return None
    return check_cluster_name(value)


def _parse_user(value: str) -> str:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.\-]{0,63}", value):
        raise ValueError("must be letters, digits, '_', '.' or '-', starting with a letter or '_'")
    return value


def _parse_password(value: str) -> str:
    if _CONTROL_RE.search(value):
        raise ValueError("must not contain control characters")
    return value


def _parse_token(value: str) -> str:
    if _SPACE_OR_CONTROL_RE.search(value):
        raise ValueError("must not contain whitespace or control characters")
    return value


def _is_host(value: str) -> bool:
    """A DNS name or IPv4 address (letters, digits, '.', '-', '_'), or an IPv6 address."""
    if _HOSTNAME_RE.fullmatch(value):
        return True
    try:
        ipaddress.IPv6Address(value)
    except ValueError:
        return False
    return True


def _parse_host(value: str) -> str:
    if not _is_host(value):
        raise ValueError("must be a host name or IP address")
    return value


def _parse_salt_buckets(value: str) -> int:
    number = values.parse_int(value)
    if not 1 <= number <= 1000:
        raise ValueError("must be between 1 and 1000")
    return number


_HBASE_PREFIX_RE = re.compile(r"([A-Za-z0-9_]{1,64}:)?[A-Za-z0-9_.\-]{0,64}")


def _parse_hbase_table_prefix(value: str) -> str:
    if not _HBASE_PREFIX_RE.fullmatch(value):
        raise ValueError("must be letters, digits, '_', '.' or '-', optionally after a namespace 'ns:'")
    return value


def _parse_zookeeper(value: str) -> str:
    hosts = [h.strip() for h in value.split(",")]
    for host_port in hosts:
        _check_authority(host_port)
        if urlsplit(f"//{host_port}").port is None:
            raise ValueError("expected host:port[,host:port]")
    return ",".join(hosts)


def _parse_sinks(value: str) -> tuple[str, ...]:
    sinks = tuple(dict.fromkeys(s.strip() for s in value.split(",") if s.strip()))
    unknown = [s for s in sinks if s not in STREAM_SINKS]
    if unknown or not sinks:
        raise ValueError(f"sinks are a comma list of {', '.join(STREAM_SINKS)}")
    return sinks


def _parse_dir(value: str) -> Path:
    path = Path(value).expanduser()
    if not path.is_absolute():
        path = Path.cwd() / path
    if path.exists() and not path.is_dir():
        raise ValueError("exists and is not a directory")
    return path


def _parse_supervisor_mode(value: str) -> str:
    try:
        return values.parse_choice(value, SUPERVISOR_MODES)
    except values.ValueTextError:
        raise ValueError(f"expected one of {', '.join(SUPERVISOR_MODES)}") from None


def _parse_control_topic(value: str) -> str | None:
    if not value or value.lower() == "none":
        return None
    if not re.fullmatch(r"persistent://[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+/[A-Za-z0-9_.=-]+", value):
        raise ValueError("must be persistent://<tenant>/<namespace>/<topic>, or empty (none) for no events")
    return value


def _parse_file(value: str) -> Path | None:
    if not value:
        return None
    path = Path(value).expanduser()
    if not path.is_absolute():
        path = Path.cwd() / path
    if path.exists() and not path.is_file():
        raise ValueError("exists and is not a file")
    return path


def _parse_command(value: str) -> str:
    if _CONTROL_RE.search(value):
        raise ValueError("must not contain control characters")
    return value


def _parse_java_home(value: str) -> str | None:
    return str(_parse_dir(value))


def _parse_jars(value: str) -> tuple[str, ...]:
    return tuple(j.strip() for j in value.split(",") if j.strip())


def _parse_spark_conf(value: str) -> tuple[tuple[str, str], ...]:
    pairs: list[tuple[str, str]] = []
    for raw_item in re.split(r"[;\n]", value):
        item = raw_item.strip()
        if not item:
            continue
        key, sep, conf_value = item.partition("=")
        key = key.strip()
        if not sep or not _CONF_KEY_RE.fullmatch(key):
            raise ValueError(f"{_mask_spark_conf(item)!r} is not a key=value pair")
        pairs.append((key, conf_value.strip()))
    return tuple(pairs)


def _check_authority(host_port: str) -> None:
    """``host[:port]`` (userinfo already removed): a host, and a port in range if one is given."""
    try:
        parts = urlsplit(f"//{host_port}")
        port = parts.port
    except ValueError:
        raise ValueError("the port must be a number between 1 and 65535") from None
    if not parts.hostname or not _is_host(parts.hostname):
        raise ValueError("missing host")
    if port == 0:
        raise ValueError("the port must be a number between 1 and 65535")


def _split_url(value: str) -> SplitResult:
    if _SPACE_OR_CONTROL_RE.search(value):
        raise ValueError("a URL must not contain whitespace or control characters")
    try:
        return urlsplit(value)
    except ValueError:
        raise ValueError("is not a valid URL") from None


def _authority(parts: SplitResult) -> str:
    """``host[:port]`` of a URL, without ``user:password@``."""
    return parts.netloc.rpartition("@")[2]


def _url_parser(*schemes: str, multi_host: bool = False) -> Callable[[str], str]:
    """A URL with one of ``schemes``, a host and a valid port (``multi_host``: ``h1:p1,h2:p2``).

    A query or fragment is refused: these are base URLs that paths are appended to.
    """

    def parse(value: str) -> str:
        parts = _split_url(value)
        if parts.scheme not in schemes:
            raise ValueError(f"scheme must be one of {', '.join(schemes)}")
        if parts.query or parts.fragment:
            raise ValueError("a base URL takes no query (?...) or fragment (#...)")
        authority = _authority(parts)
        for host_port in authority.split(",") if multi_host else [authority]:
            _check_authority(host_port)
        return value.rstrip("/")

    return parse


EMBEDDED_METASTORE = "embedded"
"""The value of WIDEHOUSE_HIVE_METASTORE_URI that opts into Spark's in-process Derby metastore."""


def _parse_metastore_uri(value: str) -> str | None:
    """A ``thrift://host:port`` metastore URI, or ``embedded`` (None: Spark's in-process Derby)."""
    if value.lower() == EMBEDDED_METASTORE:
        return None
    try:
        return _url_parser("thrift")(value)
    except ValueError as exc:
        raise ValueError(f"{exc} (or `{EMBEDDED_METASTORE}` for Spark's in-process Derby)") from exc


_CHDB_MEMORY = ("memory", ":memory:")


def _parse_clickhouse_dsn(value: str) -> str:
    parts = _split_url(value)
    authority, path = _authority(parts), parts.path
    if parts.scheme == "chdb":
        if authority and authority not in _CHDB_MEMORY:
            raise ValueError("a chdb DSN is chdb:///absolute/path or chdb://memory")
        if not authority and not path:
            raise ValueError("a chdb DSN needs a location: chdb:///absolute/path or chdb://memory")
        if not authority and path not in _CHDB_MEMORY and not path.startswith("/"):
            raise ValueError("a chdb DSN needs an absolute path (chdb:///absolute/path) or chdb://memory")
        database = path.strip("/").split("/")[0] if authority else ""
    elif parts.scheme in {"http", "https"}:
        _check_authority(authority)
        database = path.strip("/").split("/")[0]
    else:
        raise ValueError("scheme must be chdb, http or https")
    if database and not _IDENTIFIER_RE.fullmatch(unquote(database)):
        raise ValueError("the database in the DSN path must be a plain identifier")
    return value


def _parse_location(value: str) -> str:
    """An absolute path or a URI (``s3a://bucket/dir``), safe to put in a backquoted Spark SQL name."""
    if "`" in value or _CONTROL_RE.search(value):
        raise ValueError("must not contain a backquote or control characters (it is quoted into Spark SQL)")
    if value.startswith("/"):
        return value
    if _URI_RE.fullmatch(value):
        parts = urlsplit(value)
        if parts.netloc or parts.path.startswith("/"):
            return value
    raise ValueError(
        "must be an absolute path or a URI with a scheme (file:/, s3a://, abfss://, hdfs://, gs://)"
    )


def _parse_optional_location(value: str) -> str | None:
    """:func:`_parse_location`, or None for ``none``."""
    return None if value.lower() == "none" else _parse_location(value)


def _parse_optional_command(value: str) -> str | None:
    """An executable path or name (no whitespace), or None for ``none``."""
    if value.lower() == "none":
        return None
    if any(c.isspace() for c in value) or _CONTROL_RE.search(value):
        raise ValueError("must be one executable path or name, without spaces")
    return value


def _parse_spark_master(value: str) -> str:
    if value == "yarn" or _SPARK_LOCAL_RE.fullmatch(value):
        return value
    if value.startswith("spark://"):
        for host_port in value.removeprefix("spark://").split(","):
            if ":" not in host_port:
                raise ValueError("spark:// masters are spark://host:port[,host:port]")
            _check_authority(host_port)
        return value
    if value.startswith("k8s://"):
        api = value.removeprefix("k8s://")
        _url_parser("http", "https")(api if "://" in api else f"https://{api}")
        return value
    if value.startswith("mesos://"):
        rest = value.removeprefix("mesos://")
        if rest.startswith("zk://"):
            _url_parser("zk", multi_host=True)(rest)
        else:
            _check_authority(rest)
        return value
    raise ValueError(
        "expected local, local[N], local[*], local[N,M], spark://host:port, yarn, k8s:// or mesos://"
    )

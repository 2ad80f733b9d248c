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
from typing import TypeVar
from urllib.parse import SplitResult, unquote, urlsplit

from widehouse.contracts import periods, values
from widehouse.contracts.tables import check_cluster_name
from widehouse.settings.masking import mask_spark_conf

STREAM_SINKS = ("clickhouse", "delta")
MAX_CUT_SLACK = 0.5
"""The most a cut may fall short of its take (the Pulsar source's ``cutSlack``): at least half."""
SUPERVISOR_MODES = ("local", "cluster")

N = TypeVar("N", int, float)


_HEAP_RE = re.compile(r"[1-9][0-9]*[kKmMgG]")
_CONF_KEY_RE = re.compile(r"[A-Za-z0-9_.\-]+")
_HOSTNAME_RE = re.compile(r"[A-Za-z0-9_.\-]+")
_IDENTIFIER_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
_SPACE_OR_CONTROL_RE = re.compile(r"[\s\x00-\x1f\x7f]")
_URI_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]+:.+")
_SPARK_LOCAL_RE = re.compile(r"local(\[([1-9][0-9]*|\*)(\s*,\s*[0-9]+)?\])?")


def _matching(pattern: str | re.Pattern[str], problem: str) -> Callable[[str], str]:
    """A parser of texts that match ``pattern`` entirely; ``problem`` says what else they must be."""
    regex = re.compile(pattern)

    def parse(value: str) -> str:
        if not regex.fullmatch(value):
            raise ValueError(problem)
        return value

    return parse


def _without(pattern: re.Pattern[str], problem: str) -> Callable[[str], str]:
    """A parser of texts in which ``pattern`` occurs nowhere; ``problem`` says what they must not hold."""

    def parse(value: str) -> str:
        if pattern.search(value):
            raise ValueError(problem)
        return value

    return parse


def _checked(convert: Callable[[str], N], ok: Callable[[N], bool], problem: str) -> Callable[[str], N]:
    """A parser of the numbers ``convert`` reads (:mod:`widehouse.contracts.values`) for which ``ok``
    holds; ``problem`` says what else they must be."""

    def parse(value: str) -> N:
        number = convert(value)
        if not ok(number):
            raise ValueError(problem)
        return number

    return parse


parse_port = _checked(values.parse_int, lambda n: 1 <= n <= 65535, "a port must be between 1 and 65535")
parse_salt_buckets = _checked(values.parse_int, lambda n: 1 <= n <= 1000, "must be between 1 and 1000")
parse_positive_int = _checked(values.parse_int, lambda n: n > 0, "must be a positive integer")
parse_non_negative_int = _checked(values.parse_int, lambda n: n >= 0, "must be >= 0")
parse_compact_files = _checked(values.parse_int, lambda n: n >= 2, "must be an integer >= 2")
parse_positive_float = _checked(values.parse_float, lambda n: n > 0, "must be a positive number")
parse_non_negative_float = _checked(values.parse_float, lambda n: n >= 0, "must be a finite number >= 0")
parse_cut_slack = _checked(
    values.parse_float, lambda n: 0 <= n <= MAX_CUT_SLACK, f"must be between 0 and {MAX_CUT_SLACK}"
)

parse_app_id = _matching(
    r"[a-z][a-z0-9_-]{0,31}", "must be lowercase letters, digits, '-' or '_', starting with a letter (max 32)"
)
parse_tenant_suffix = _matching(r"[a-z0-9][a-z0-9-]{0,30}", "must be 1-31 lowercase letters, digits or '-'")
parse_identifier = _matching(_IDENTIFIER_RE, "must be a plain identifier (letters, digits, underscore)")
parse_user = _matching(
    r"[A-Za-z_][A-Za-z0-9_.\-]{0,63}",
    "must be letters, digits, '_', '.' or '-', starting with a letter or '_'",
)
parse_hbase_table_prefix = _matching(
    r"([A-Za-z0-9_]{1,64}:)?[A-Za-z0-9_.\-]{0,64}",
    "must be letters, digits, '_', '.' or '-', optionally after a namespace 'ns:'",
)
parse_password = _without(_CONTROL_RE, "must not contain control characters")
parse_command = _without(_CONTROL_RE, "must not contain control characters")
parse_token = _without(_SPACE_OR_CONTROL_RE, "must not contain whitespace or control characters")


def parse_start_hour(value: str) -> dt.datetime:
    try:
        return periods.parse_hour(value)
    except periods.PeriodError as exc:  # the resolver names the variable and the value
        raise ValueError(exc.problem) from exc


def parse_heap(value: str) -> str:
    if not _HEAP_RE.fullmatch(value):
        raise ValueError("expected a JVM size such as 512m or 2g")
    return value.lower()


def parse_bool(value: str) -> bool:
    try:
        return values.parse_bool(value)
    except values.ValueTextError:
        raise ValueError("expected true or false") from None


def parse_clickhouse_cluster(value: str) -> str | None:
    if value.lower() == "none":
        return None
    return check_cluster_name(value)


def _is_host(value: str) -> bool:
    """A DNS name or IPv4 address (letters, digits, '.', '-', '_'), or an IPv6 address."""
    if _HOSTNAME_RE.fullmatch(value):
        return True
    try:
        ipaddress.IPv6Address(value)
    except ValueError:
        return False
    return True


def parse_host(value: str) -> str:
    if not _is_host(value):
        raise ValueError("must be a host name or IP address")
    return value


def parse_zookeeper(value: str) -> str:
    hosts = [h.strip() for h in value.split(",")]
    for host_port in hosts:
        _check_authority(host_port)
        if urlsplit(f"//{host_port}").port is None:
            raise ValueError("expected host:port[,host:port]")
    return ",".join(hosts)


def parse_sinks(value: str) -> tuple[str, ...]:
    sinks = tuple(dict.fromkeys(s.strip() for s in value.split(",") if s.strip()))
    unknown = [s for s in sinks if s not in STREAM_SINKS]
    if unknown or not sinks:
        raise ValueError(f"sinks are a comma list of {', '.join(STREAM_SINKS)}")
    return sinks


def _absolute(value: str) -> Path:
    """``value`` as an absolute path (``~`` expanded, a relative one under the working directory)."""
    path = Path(value).expanduser()
    return path if path.is_absolute() else Path.cwd() / path


def parse_dir(value: str) -> Path:
    path = _absolute(value)
    if path.exists() and not path.is_dir():
        raise ValueError("exists and is not a directory")
    return path


def parse_supervisor_mode(value: str) -> str:
    try:
        return values.parse_choice(value, SUPERVISOR_MODES)
    except values.ValueTextError:
        raise ValueError(f"expected one of {', '.join(SUPERVISOR_MODES)}") from None


PULSAR_AUTH_MODES = ("none", "token")
CLICKHOUSE_COMPRESSIONS = ("auto", "none", "lz4", "zstd")


def parse_clickhouse_compression(value: str) -> str:
    return _one_of(value, CLICKHOUSE_COMPRESSIONS)


def parse_pulsar_auth(value: str) -> str:
    return _one_of(value, PULSAR_AUTH_MODES)


def _one_of(value: str, choices: tuple[str, ...]) -> str:
    """One of ``choices`` (all lower case), whatever the case and surrounding blanks of ``value``."""
    choice = value.strip().lower()
    if choice not in choices:
        raise ValueError(f"expected one of {', '.join(choices)}")
    return choice


def parse_control_topic(value: str) -> str | None:
    if not value or value.lower() == "none":
        return None
    if not re.fullmatch(r"persistent://[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+/[A-Za-z0-9_.=-]+", value):
        raise ValueError("must be persistent://<tenant>/<namespace>/<topic>, or empty (none) for no events")
    return value


def parse_file(value: str) -> Path | None:
    if not value:
        return None
    path = _absolute(value)
    if path.exists() and not path.is_file():
        raise ValueError("exists and is not a file")
    return path


def parse_java_home(value: str) -> str | None:
    return str(parse_dir(value))


def parse_jars(value: str) -> tuple[str, ...]:
    return tuple(j.strip() for j in value.split(",") if j.strip())


def parse_spark_conf(value: str) -> tuple[tuple[str, str], ...]:
    pairs: list[tuple[str, str]] = []
    for raw_item in re.split(r"[;\n]", value):
        item = raw_item.strip()
        if not item:
            continue
        key, sep, conf_value = item.partition("=")
        key = key.strip()
        if not sep or not _CONF_KEY_RE.fullmatch(key):
            raise ValueError(f"{mask_spark_conf(item)!r} is not a key=value pair")
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


def url_parser(*schemes: str, multi_host: bool = False) -> Callable[[str], str]:
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


def parse_metastore_uri(value: str) -> str | None:
    """A ``thrift://host:port`` metastore URI, or ``embedded`` (None: Spark's in-process Derby)."""
    if value.lower() == EMBEDDED_METASTORE:
        return None
    try:
        return url_parser("thrift")(value)
    except ValueError as exc:
        raise ValueError(f"{exc} (or `{EMBEDDED_METASTORE}` for Spark's in-process Derby)") from exc


_CHDB_MEMORY = ("memory", ":memory:")


def parse_clickhouse_dsn(value: str) -> str:
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


def parse_location(value: str) -> str:
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


def parse_optional_location(value: str) -> str | None:
    """:func:`parse_location`, or None for ``none``."""
    return None if value.lower() == "none" else parse_location(value)


def parse_local_dir_or_off(value: str) -> str | None:
    """A local absolute directory, or None for ``off``; no whitespace (the class archive's path goes
    into the JVM's options). For what the driver's start reads from its own disk: the class archive,
    the launch plans."""
    if value.lower() == "off":
        return None
    if not value.startswith("/") or any(c.isspace() for c in value) or _CONTROL_RE.search(value):
        raise ValueError("must be `off` or an absolute local directory path without spaces")
    return value


JVM_JIT_PROFILES = ("c1", "late-c2", "tiered")
"""How a JVM Widehouse starts compiles (:mod:`widehouse.jvm` holds each profile's options)."""

DRIVER_JIT_PROFILES = ("auto", *JVM_JIT_PROFILES)
"""The Spark driver's profiles: ``auto`` picks one per workload (:mod:`widehouse.spark.jit`)."""


def parse_driver_jit(value: str) -> str:
    return _one_of(value, DRIVER_JIT_PROFILES)


def parse_jvm_jit(value: str) -> str:
    return _one_of(value, JVM_JIT_PROFILES)


def parse_optional_command(value: str) -> str | None:
    """An executable path or name (no whitespace), or None for ``none``."""
    if value.lower() == "none":
        return None
    if any(c.isspace() for c in value) or _CONTROL_RE.search(value):
        raise ValueError("must be one executable path or name, without spaces")
    return value


def parse_spark_master(value: str) -> str:
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
        url_parser("http", "https")(api if "://" in api else f"https://{api}")
        return value
    if value.startswith("mesos://"):
        rest = value.removeprefix("mesos://")
        if rest.startswith("zk://"):
            url_parser("zk", multi_host=True)(rest)
        else:
            _check_authority(rest)
        return value
    raise ValueError(
        "expected local, local[N], local[*], local[N,M], spark://host:port, yarn, k8s:// or mesos://"
    )

"""The one place that reads the environment.

Every ``WIDEHOUSE_*`` variable is declared once in :data:`VARIABLES`: its name, default, parser,
the field of :class:`Settings` it sets (``target``), its meaning, and whether it is a secret. The
README's table, the dataclass defaults and :func:`load_settings` are all derived from that table;
fields no variable sets (``local.state_dir``, ``hive.metastore_db_dir``, ``spark.local_dir``) are
declared in :data:`DERIVED_FIELDS`. Everything else in Widehouse receives the frozen config objects
(or plain values taken from them). Airflow passes its Connections to jobs as these same variables at
run time, so a job runs the same from a shell, a DAG or a test.

Defaults describe the local mode: services on loopback, state under ``<checkout>/.state``,
ClickHouse embedded (chDB), Hive metastore embedded. Point any of them at a cluster by setting the
variable; nothing in the code assumes local mode.

The local services' passwords have no constant default: ``widehouse services up`` / ``airflow up``
generate them once per state dir (:func:`create_local_secrets`, :mod:`widehouse.private`), and the
defaults read them from there (None until then). Loading never writes, so it stays side-effect free
for ``widehouse config``, DAG parsing and executors; a variable (or an explicit DSN) always wins.

A bad value fails at load time with the variable's name and its value, except for secrets, whose
value is never echoed; URLs are shown with their credentials masked (:func:`mask_url`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import ipaddress
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar
from urllib.parse import SplitResult, quote, unquote, urlsplit

from widehouse import paths, private
from widehouse.errors import ConfigError

T = TypeVar("T")


# -- declarations -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Derived(Generic[T]):
    """A default computed from other values at load time.

    ``compute`` receives a mapping with exactly the names in ``uses``: a ``WIDEHOUSE_*`` name gives
    that variable's parsed value (resolved first), any other name (``JAVA_HOME``) the raw environment
    value or None. ``doc`` is the default as documented (``<state>/delta``).
    """

    doc: str
    uses: tuple[str, ...]
    compute: Callable[[Mapping[str, Any]], T]


@dataclass(frozen=True)
class Variable(Generic[T]):
    """One environment variable: where it goes, how it is parsed, and what it defaults to."""

    name: str
    default: T | Derived[T]
    """The parsed default value, or a :class:`Derived` default computed from other variables."""
    parse: Callable[[str], T]
    """Turns the stripped, non-blank text (blank too with ``blank_is_value``) into the value."""
    target: str
    """Dotted path of the :class:`Settings` field it sets (``local.pulsar_broker_port``)."""
    help: str
    secret: bool = False
    """Never echoed: errors say what is wrong without the value, reprs and `widehouse config` mask it."""
    blank_is_value: bool = False
    """A set but blank variable is parsed (``WIDEHOUSE_SPARK_JARS=`` means no jars) instead of unset."""
    doc: str | None = None
    """The documented default when the value alone does not say it (None meaning embedded Derby)."""
    mask: Callable[[str], str] | None = None
    """How a bad (non-secret) value is shown in errors; :func:`mask_url` unless set."""

    @property
    def documented_default(self) -> str:
        """The default as the README and ``widehouse config --variables`` show it."""
        if self.doc is not None:
            return self.doc
        if isinstance(self.default, Derived):
            return self.default.doc
        return format_value(self.default)

    def shown(self, text: str) -> str:
        """How a bad value appears in an error: ``NAME='value'``, credentials masked; secrets never."""
        if self.secret:
            return self.name
        return f"{self.name}={(self.mask or mask_url)(text)!r}"


@dataclass(frozen=True)
class DerivedField:
    """A :class:`Settings` field no variable sets: it follows from other variables."""

    target: str
    default: Derived[Any]


def format_value(value: object) -> str:
    """A parsed value written back as a variable's text (``0.8``, ``20000000``, ``clickhouse,delta``)."""
    if value is None or value == ():
        return "(none)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, tuple):
        return ",".join(format_value(v) for v in value)
    return str(value)


# -- masking ------------------------------------------------------------------------------------

_USERINFO_RE = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^/?#@:\s]*):(?P<password>[^/?#\s]*)@")
_PARAM_RE = re.compile(r"(?P<head>(?:^|[&;])(?P<key>[^=&;#\s]*)=)(?P<value>[^&;#\s]*)")
_SECRET_KEY_PARTS = ("pass", "pwd", "token", "secret", "key", "credential", "signature", "auth")
MASK = "***"


def is_secret_key(key: str) -> bool:
    """True for a parameter or setting name that usually holds a credential (case-insensitive)."""
    lowered = unquote(key).lower()
    return any(part in lowered for part in _SECRET_KEY_PARTS)


def mask_url(url: str) -> str:
    """Mask the credentials of a URL (or of every URL in a text) with ``***``.

    Masks the password of ``user:password@`` and the value of query parameters whose name holds a
    credential (``password``, ``pass``, ``pwd``, ``token``, ``key``, ``secret``, ... in any case).
    Works on malformed URLs and on free text that contains URLs (error messages).
    """
    masked = _USERINFO_RE.sub(lambda m: f"{m['head']}:{MASK}@" if m["password"] else m[0], url)
    head, sep, query = masked.partition("?")
    if not sep:
        return masked
    query, hash_sep, fragment = query.partition("#")

    def param(m: re.Match[str]) -> str:
        return f"{m['head']}{MASK}" if is_secret_key(m["key"]) and m["value"] else m[0]

    return f"{head}?{_PARAM_RE.sub(param, query)}{hash_sep}{fragment}"


def _mask_spark_conf(text: str) -> str:
    """WIDEHOUSE_SPARK_CONF with the values of credential-like keys masked."""
    return re.sub(
        r"(?P<key>[^;\n=]*)=(?P<value>[^;\n]*)",
        lambda m: f"{m['key']}={MASK}" if is_secret_key(m["key"]) else mask_url(m[0]),
        text,
    )


# -- parsers (each raises ValueError saying what is wrong; those of secrets never quote the value) --

_HEAP_RE = re.compile(r"[1-9][0-9]*[kKmMgG]")
_CONF_KEY_RE = re.compile(r"[A-Za-z0-9_.\-]+")
_HOSTNAME_RE = re.compile(r"[A-Za-z0-9_.\-]+")
_IDENTIFIER_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
_SPACE_OR_CONTROL_RE = re.compile(r"[\s\x00-\x1f\x7f]")
_URI_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]+:.+")
_SPARK_LOCAL_RE = re.compile(r"local(\[([1-9][0-9]*|\*)(\s*,\s*[0-9]+)?\])?")


def _finite(value: str) -> float:
    number = float(value)
    if not math.isfinite(number):
        raise ValueError("must be a finite number")
    return number


def _parse_port(value: str) -> int:
    port = int(value)
    if not 1 <= port <= 65535:
        raise ValueError("a port must be between 1 and 65535")
    return port


def _parse_hour(value: str) -> dt.datetime:
    try:
        moment = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ValueError("expected a UTC hour such as 2026-01-01T00:00Z") from exc
    moment = (moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)).astimezone(dt.UTC)
    if moment.minute or moment.second or moment.microsecond:
        raise ValueError("must be the start of an hour (minutes and seconds zero)")
    return moment


def _parse_heap(value: str) -> str:
    if not _HEAP_RE.fullmatch(value):
        raise ValueError("expected a JVM size such as 512m or 2g")
    return value.lower()


def _parse_positive_int(value: str) -> int:
    number = int(value)
    if number <= 0:
        raise ValueError("must be a positive integer")
    return number


def _parse_non_negative_int(value: str) -> int:
    number = int(value)
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
    lowered = value.lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ValueError("expected true or false")


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
    number = int(value)
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
    if value not in SUPERVISOR_MODES:
        raise ValueError(f"expected one of {', '.join(SUPERVISOR_MODES)}")
    return value


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


# -- defaults that follow from other values -----------------------------------------------------

STATE = "WIDEHOUSE_STATE_DIR"
STREAM_SINKS = ("clickhouse", "delta")
CONTROL_TOPIC_DEFAULT = "persistent://widehouse/control/watermarks"
SUPERVISOR_MODES = ("local", "cluster")


def _under_state(doc: str, *parts: str, parse: Callable[[str], str] = _parse_location) -> Derived[str]:
    """``<state>/a/b``: a location under the state dir, validated like a value set by hand."""
    return Derived(f"<state>/{doc}", (STATE,), lambda r: parse(str(Path(r[STATE], *parts))))


def _local_clickhouse_url(user: str, password: str | None, port: int) -> str:
    """The local service's URL; without a password (none generated yet) it names the user alone."""
    auth = quote(user, safe="") if password is None else f"{quote(user, safe='')}:{quote(password, safe='')}"
    return f"http://{auth}@127.0.0.1:{port}"


def _generated(name: str, by: str) -> Derived[str | None]:
    """A local password: the one generated into ``<state>/secrets/<name>`` by ``by``, else None."""
    return Derived(
        f"(generated by the first `{by}`, kept in <state>/{private.SECRETS_DIR}/{name})",
        (STATE,),
        lambda r: private.read_secret(r[STATE], name),
    )


EMBEDDED_CLICKHOUSE_DSN: Derived[str] = Derived(
    "chdb://<state>/clickhouse",
    (STATE,),
    lambda r: _parse_clickhouse_dsn(f"chdb://{quote(str(r[STATE] / 'clickhouse'))}"),
)
LOCAL_SERVER_CLICKHOUSE_DSN: Derived[str] = Derived(
    "http://<user>:<password>@127.0.0.1:<port>/<database>",
    (
        "WIDEHOUSE_CLICKHOUSE_USER",
        "WIDEHOUSE_CLICKHOUSE_PASSWORD",
        "WIDEHOUSE_CLICKHOUSE_PORT",
        "WIDEHOUSE_CLICKHOUSE_DATABASE",
    ),
    lambda r: (
        _local_clickhouse_url(
            r["WIDEHOUSE_CLICKHOUSE_USER"], r["WIDEHOUSE_CLICKHOUSE_PASSWORD"], r["WIDEHOUSE_CLICKHOUSE_PORT"]
        )
        + f"/{r['WIDEHOUSE_CLICKHOUSE_DATABASE']}"
    ),
)
# The default of WIDEHOUSE_CLICKHOUSE_DSN: the local `clickhouse` service of `widehouse services`.
CLICKHOUSE_DSN_DEFAULT = LOCAL_SERVER_CLICKHOUSE_DSN


def default_delta_jars(vendor_dir: Path) -> tuple[str, ...]:
    """The Delta jars `make setup` resolved; empty when setup has not run (checked at session start)."""
    return tuple(str(p) for p in sorted((vendor_dir / "delta").glob("*.jar")))


# -- the table ----------------------------------------------------------------------------------

VARIABLES: tuple[Variable[Any], ...] = (
    Variable(
        STATE,
        Derived("<checkout>/.state", (), lambda _: paths.default_state_dir()),
        _parse_dir,
        "state_dir",
        "Local state: service data, logs, pid files, chDB data, Delta tables, Hive metastore, checkpoints.",
    ),
    Variable(
        "WIDEHOUSE_VENDOR_DIR",
        Derived("<checkout>/.vendor", (), lambda _: paths.default_vendor_dir()),
        _parse_dir,
        "local.vendor_dir",
        "JVM parts resolved by `make setup` (Pulsar distribution, HBase jars, Delta jars, Maven repository).",
    ),
    Variable(
        "WIDEHOUSE_SCHEMAS_DIR",
        Derived("<checkout>/schemas", (), lambda _: paths.default_schemas_dir()),
        _parse_dir,
        "schemas_dir",
        "The topic and wide-table catalog.",
    ),
    Variable(
        "WIDEHOUSE_PULSAR_SERVICE_URL",
        Derived(
            "pulsar://127.0.0.1:<pulsar broker port>",
            ("WIDEHOUSE_PULSAR_BROKER_PORT",),
            lambda r: f"pulsar://127.0.0.1:{r['WIDEHOUSE_PULSAR_BROKER_PORT']}",
        ),
        _url_parser("pulsar", "pulsar+ssl", multi_host=True),
        "pulsar.service_url",
        "Pulsar binary protocol URL (pulsar:// or pulsar+ssl://).",
    ),
    Variable(
        "WIDEHOUSE_PULSAR_ADMIN_URL",
        Derived(
            "http://127.0.0.1:<pulsar web port>",
            ("WIDEHOUSE_PULSAR_WEB_PORT",),
            lambda r: f"http://127.0.0.1:{r['WIDEHOUSE_PULSAR_WEB_PORT']}",
        ),
        _url_parser("http", "https"),
        "pulsar.admin_url",
        "Pulsar admin REST URL (http:// or https://).",
    ),
    Variable(
        "WIDEHOUSE_PULSAR_AUTH_TOKEN",
        None,
        _parse_token,
        "pulsar.auth_token",
        "JWT for Pulsar token authentication.",
        secret=True,
    ),
    Variable(
        "WIDEHOUSE_CLICKHOUSE_DSN",
        CLICKHOUSE_DSN_DEFAULT,
        _parse_clickhouse_dsn,
        "clickhouse.dsn",
        "ClickHouse: `http(s)://user:pass@host:8123/db` for a server (by default the local `clickhouse` "
        "service), or `chdb:///abs/path` for an in-process engine owned by one process.",
        secret=True,
    ),
    Variable(
        "WIDEHOUSE_CLICKHOUSE_DATABASE",
        "wh",
        _parse_identifier,
        "clickhouse.database",
        "ClickHouse database for Widehouse tables (a database in the DSN path wins).",
    ),
    Variable(
        "WIDEHOUSE_DELTA_ROOT",
        _under_state("delta", "delta"),
        _parse_location,
        "delta.root",
        "Root path or URI of the Delta tables (bronze/, silver/ below it).",
    ),
    Variable(
        "WIDEHOUSE_HBASE_HOST", "127.0.0.1", _parse_host, "hbase.host", "HBase Thrift (v1) server host."
    ),
    Variable(
        "WIDEHOUSE_HBASE_PORT",
        Derived(
            "<hbase thrift port>",
            ("WIDEHOUSE_HBASE_THRIFT_PORT",),
            lambda r: r["WIDEHOUSE_HBASE_THRIFT_PORT"],
        ),
        _parse_port,
        "hbase.port",
        "HBase Thrift (v1) server port.",
    ),
    Variable(
        "WIDEHOUSE_HBASE_TIMEOUT_MS",
        60000,
        _parse_positive_int,
        "hbase.timeout_ms",
        "HBase Thrift socket timeout in milliseconds.",
    ),
    Variable(
        "WIDEHOUSE_HBASE_SALT_BUCKETS",
        16,
        _parse_salt_buckets,
        "hbase.salt_buckets",
        "Salt buckets of the HBase day tables (row key prefix, pre-split regions, parallel extract scans).",
    ),
    Variable(
        "WIDEHOUSE_HBASE_TABLE_PREFIX",
        "wh_",
        _parse_hbase_table_prefix,
        "hbase.table_prefix",
        "Prefix of the HBase day tables: ``wh_`` gives ``wh_user_daily``; ``ns:`` puts them in an existing "
        "namespace.",
    ),
    Variable(
        "WIDEHOUSE_HBASE_ZOOKEEPER",
        Derived(
            "127.0.0.1:<hbase zk port>",
            ("WIDEHOUSE_HBASE_ZK_PORT",),
            lambda r: f"127.0.0.1:{r['WIDEHOUSE_HBASE_ZK_PORT']}",
        ),
        _parse_zookeeper,
        "hbase.zookeeper",
        "HBase ZooKeeper quorum (host:port[,host:port]); only creating a pre-split day table uses it.",
    ),
    Variable(
        "WIDEHOUSE_HIVE_METASTORE_URI",
        None,
        _url_parser("thrift"),
        "hive.metastore_uri",
        "thrift:// URI of a Hive metastore; empty means Spark's embedded metastore under the state dir.",
        doc="(embedded Derby)",
    ),
    Variable(
        "WIDEHOUSE_HIVE_WAREHOUSE",
        _under_state("hive/warehouse", "hive", "warehouse"),
        _parse_location,
        "hive.warehouse_dir",
        "Hive / Spark SQL warehouse dir.",
    ),
    Variable(
        "WIDEHOUSE_SPARK_MASTER",
        "local[*]",
        _parse_spark_master,
        "spark.master",
        "Spark master URL (local[N], spark://, yarn, k8s://).",
    ),
    Variable(
        "WIDEHOUSE_SPARK_SHUFFLE_PARTITIONS",
        4,
        _parse_positive_int,
        "spark.shuffle_partitions",
        "spark.sql.shuffle.partitions.",
    ),
    Variable(
        "WIDEHOUSE_SPARK_UI", False, _parse_bool, "spark.ui_enabled", "Start the Spark UI (true/false)."
    ),
    Variable(
        "WIDEHOUSE_SPARK_DRIVER_MEMORY",
        "2g",
        _parse_heap,
        "spark.driver_memory",
        "spark.driver.memory (heap of the driver JVM).",
    ),
    Variable(
        "WIDEHOUSE_SPARK_JARS",
        Derived(
            "(Delta jars in the vendor dir)",
            ("WIDEHOUSE_VENDOR_DIR",),
            lambda r: default_delta_jars(r["WIDEHOUSE_VENDOR_DIR"]),
        ),
        _parse_jars,
        "spark.jars",
        "Comma-separated jars for spark.jars; set empty on a cluster that ships Delta itself.",
        blank_is_value=True,
    ),
    Variable(
        "WIDEHOUSE_SPARK_CONF",
        (),
        _parse_spark_conf,
        "spark.extra_conf",
        "Extra Spark settings, `key=value` pairs separated "
        "by newlines or `;`; they win over every other Spark setting.",
        mask=_mask_spark_conf,
    ),
    Variable(
        "WIDEHOUSE_JAVA_HOME",
        Derived("(JAVA_HOME, or java on PATH)", ("JAVA_HOME",), lambda r: r["JAVA_HOME"]),
        _parse_java_home,
        "local.java_home",
        "JDK 17+ used for the local services.",
    ),
    Variable(
        "WIDEHOUSE_PULSAR_BROKER_PORT",
        6650,
        _parse_port,
        "local.pulsar_broker_port",
        "Local Pulsar standalone: binary protocol port.",
    ),
    Variable(
        "WIDEHOUSE_PULSAR_WEB_PORT",
        8090,
        _parse_port,
        "local.pulsar_web_port",
        "Local Pulsar standalone: admin REST / web port (not 8080, which Airflow's API server takes).",
    ),
    Variable(
        "WIDEHOUSE_PULSAR_HEAP",
        "512m",
        _parse_heap,
        "local.pulsar_heap",
        "Local Pulsar standalone: JVM heap (-Xmx).",
    ),
    Variable(
        "WIDEHOUSE_PULSAR_DIRECT_MEMORY",
        "512m",
        _parse_heap,
        "local.pulsar_direct_memory",
        "Local Pulsar standalone: JVM direct memory.",
    ),
    Variable(
        "WIDEHOUSE_HBASE_ZK_PORT",
        2181,
        _parse_port,
        "local.hbase_zk_port",
        "Local HBase: embedded ZooKeeper client port.",
    ),
    Variable(
        "WIDEHOUSE_HBASE_MASTER_PORT",
        16000,
        _parse_port,
        "local.hbase_master_port",
        "Local HBase: master RPC port.",
    ),
    Variable(
        "WIDEHOUSE_HBASE_MASTER_INFO_PORT",
        16010,
        _parse_port,
        "local.hbase_master_info_port",
        "Local HBase: master web/JMX port (health).",
    ),
    Variable(
        "WIDEHOUSE_HBASE_REGIONSERVER_PORT",
        16020,
        _parse_port,
        "local.hbase_regionserver_port",
        "Local HBase: region server RPC port.",
    ),
    Variable(
        "WIDEHOUSE_HBASE_HEAP",
        "768m",
        _parse_heap,
        "local.hbase_heap",
        "Local HBase (master + region server + ZooKeeper): heap.",
    ),
    Variable(
        "WIDEHOUSE_HBASE_THRIFT_PORT",
        9090,
        _parse_port,
        "local.hbase_thrift_port",
        "Local HBase Thrift (v1) server port.",
    ),
    Variable(
        "WIDEHOUSE_HBASE_THRIFT_INFO_PORT",
        9095,
        _parse_port,
        "local.hbase_thrift_info_port",
        "Local HBase Thrift server web port.",
    ),
    Variable(
        "WIDEHOUSE_HBASE_THRIFT_HEAP",
        "256m",
        _parse_heap,
        "local.hbase_thrift_heap",
        "Local HBase Thrift server: JVM heap.",
    ),
    Variable(
        "WIDEHOUSE_CLICKHOUSE_PORT",
        8123,
        _parse_port,
        "local.clickhouse_port",
        "Local ClickHouse server: HTTP port.",
    ),
    Variable(
        "WIDEHOUSE_CLICKHOUSE_USER",
        "widehouse",
        _parse_user,
        "local.clickhouse_user",
        "Local ClickHouse server: the user Widehouse connects as.",
    ),
    Variable(
        "WIDEHOUSE_CLICKHOUSE_PASSWORD",
        _generated(private.CLICKHOUSE_PASSWORD, "widehouse services up"),
        _parse_password,
        "local.clickhouse_password",
        "Local ClickHouse server: that user's password; `widehouse config --show-secrets` shows it.",
        secret=True,
    ),
    Variable(
        "WIDEHOUSE_CLICKHOUSE_HANDLES",
        4,
        _parse_positive_int,
        "local.clickhouse_handles",
        "Local ClickHouse server: handles (concurrent sessions) it serves.",
    ),
    Variable(
        "WIDEHOUSE_SERVICE_START_TIMEOUT",
        180.0,
        _parse_positive_float,
        "local.start_timeout",
        "Seconds a local service may take to become healthy.",
    ),
    Variable(
        "WIDEHOUSE_PLAN_SLOT_CAPACITY",
        28_000_000.0,
        _parse_positive_float,
        "planner.slot_capacity",
        "Slot planner: load one core carries, in bytes/s (a message counts its bytes plus the message cost).",
    ),
    Variable(
        "WIDEHOUSE_PLAN_MESSAGE_COST",
        500.0,
        _parse_non_negative_float,
        "planner.message_cost",
        "Slot planner: bytes charged per message on top of its size, so tiny high-rate topics count.",
    ),
    Variable(
        "WIDEHOUSE_PLAN_TARGET_FILL",
        0.8,
        _parse_fraction,
        "planner.target_fill",
        "Slot planner: share of a core's capacity that packed groups (and isolated topics) are planned to.",
    ),
    Variable(
        "WIDEHOUSE_PLAN_ISOLATION",
        0.5,
        _parse_fraction,
        "planner.isolation",
        "Slot planner: topics heavier than this share of a core get a group of their own (<= target fill).",
    ),
    Variable(
        "WIDEHOUSE_PLAN_PARTITION_CAPACITY",
        5_000_000.0,
        _parse_positive_float,
        "planner.partition_capacity",
        "Slot planner: load one Pulsar partition is planned to carry, in bytes/s.",
    ),
    Variable(
        "WIDEHOUSE_PLAN_MAX_PARTITIONS",
        64,
        _parse_positive_int,
        "planner.max_partitions",
        "Slot planner: most partitions it plans for a topic.",
    ),
    Variable(
        "WIDEHOUSE_PLAN_MAX_GROUP_TOPICS",
        1000,
        _parse_positive_int,
        "planner.max_group_topics",
        "Slot planner: most topics in one packed group.",
    ),
    Variable(
        "WIDEHOUSE_PLAN_IMBALANCE",
        0.25,
        _parse_non_negative_float,
        "planner.imbalance",
        "Slot planner: drift tolerated (over the target load, over the fewest groups) before a replan "
        "moves topics.",
    ),
    Variable(
        "WIDEHOUSE_PLAN_SMOOTHING",
        5,
        _parse_positive_int,
        "planner.smoothing",
        "Slot planner: live traffic is the median of the last N stats observations kept in the state dir.",
    ),
    Variable(
        "WIDEHOUSE_TENANT_SUFFIX",
        None,
        _parse_tenant_suffix,
        "stream.tenant_suffix",
        "Run against copies of the catalog's tenants named "
        "<tenant>-<suffix> (a staging deployment, an isolated test run); the generator's --tenant-suffix.",
    ),
    Variable(
        "WIDEHOUSE_STREAM_APP",
        "widehouse",
        _parse_app_id,
        "stream.app",
        "Streaming: application id; prefixes Pulsar subscriptions, "
        "ClickHouse insert deduplication tokens and Delta txnAppIds (one per deployment).",
    ),
    Variable(
        "WIDEHOUSE_STREAM_CHECKPOINT_ROOT",
        _under_state("checkpoints", "checkpoints"),
        _parse_location,
        "stream.checkpoint_root",
        "Streaming: checkpoint root; each "
        "slot group checkpoints under <root>/<app>/<group> (a cluster path on a cluster).",
    ),
    Variable(
        "WIDEHOUSE_STREAM_TRIGGER_SECONDS",
        10.0,
        _parse_positive_float,
        "stream.trigger_seconds",
        "Streaming: micro-batch trigger interval in seconds.",
    ),
    Variable(
        "WIDEHOUSE_STREAM_MAX_MESSAGES",
        500_000,
        _parse_positive_int,
        "stream.max_messages",
        "Streaming: admission budget, messages per micro-batch over all topics of a group.",
    ),
    Variable(
        "WIDEHOUSE_STREAM_SINKS",
        STREAM_SINKS,
        _parse_sinks,
        "stream.sinks",
        "Streaming: sinks to write (clickhouse, delta).",
    ),
    Variable(
        "WIDEHOUSE_STREAM_STOP_GRACE_SECONDS",
        30.0,
        _parse_positive_float,
        "stream.stop_grace_seconds",
        "Streaming: on SIGTERM, wait this long for the running "
        "micro-batch to finish before stopping (an unfinished batch is replayed on restart).",
    ),
    Variable(
        "WIDEHOUSE_STREAM_MAX_RESTARTS",
        3,
        _parse_non_negative_int,
        "stream.max_restarts",
        "Streaming: consecutive restarts of a failed query from its checkpoint, with no batch "
        "committed in between, before the app gives up (0 = fail at once).",
    ),
    Variable(
        "WIDEHOUSE_STREAM_RESTART_BACKOFF_SECONDS",
        1.0,
        _parse_positive_float,
        "stream.restart_backoff_s",
        "Streaming: wait before the first restart of a failed query; doubled for each further "
        "consecutive failure.",
    ),
    Variable(
        "WIDEHOUSE_STREAM_RESTART_BACKOFF_MAX_SECONDS",
        60.0,
        _parse_positive_float,
        "stream.restart_backoff_max_s",
        "Streaming: cap of the wait between restarts of a failed query.",
    ),
    Variable(
        "WIDEHOUSE_STREAM_DEAD_LETTER",
        False,
        _parse_bool,
        "stream.dead_letter",
        "Streaming: also forward every quarantined message to its topic's dead-letter topic "
        "<topic>-DLQ (same namespace), reason and origin as properties (true/false).",
    ),
    Variable(
        "WIDEHOUSE_STREAM_CONTROL_TOPIC",
        CONTROL_TOPIC_DEFAULT,
        _parse_control_topic,
        "stream.control_topic",
        "Streaming: each slot group publishes its committed watermark here (JSON, one message per "
        "batch; what the hourly event trigger watches); empty or `none` publishes nothing.",
        blank_is_value=True,
    ),
    Variable(
        "WIDEHOUSE_AIRFLOW_PORT",
        8080,
        _parse_port,
        "airflow.port",
        "Local Airflow: API server (UI, REST API, task execution API) port on loopback.",
    ),
    Variable(
        "WIDEHOUSE_AIRFLOW_WORKER_LOG_PORT",
        8793,
        _parse_port,
        "airflow.worker_log_port",
        "Local Airflow: the scheduler's log server port (task logs while they run).",
    ),
    Variable(
        "WIDEHOUSE_AIRFLOW_TRIGGERER_LOG_PORT",
        8794,
        _parse_port,
        "airflow.triggerer_log_port",
        "Local Airflow: the triggerer's log server port.",
    ),
    Variable(
        "WIDEHOUSE_AIRFLOW_USER",
        "admin",
        _parse_user,
        "airflow.user",
        "Local Airflow: the UI / REST API user (simple auth manager, admin role).",
    ),
    Variable(
        "WIDEHOUSE_AIRFLOW_PASSWORD",
        _generated(private.AIRFLOW_PASSWORD, "widehouse airflow up"),
        _parse_password,
        "airflow.password",
        "Local Airflow: that user's password; `widehouse config --show-secrets` shows it.",
        secret=True,
    ),
    Variable(
        "WIDEHOUSE_AIRFLOW_DAGS_DIR",
        Derived("<checkout>/dags", (), lambda _: paths.default_dags_dir()),
        _parse_dir,
        "airflow.dags_dir",
        "Local Airflow: the DAG folder it parses.",
    ),
    Variable(
        "WIDEHOUSE_AIRFLOW_CONNECTIONS_FILE",
        Derived(
            "<checkout>/docker/airflow/dev-connections.json",
            (),
            lambda _: paths.default_airflow_connections_file(),
        ),
        _parse_file,
        "airflow.connections_file",
        "Local Airflow: JSON file of Connections (local file-system secrets backend); "
        "empty means the metadata DB only.",
        blank_is_value=True,
    ),
    Variable(
        "WIDEHOUSE_AIRFLOW_START",
        dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        _parse_hour,
        "airflow.start",
        "Airflow: the first hour the scheduled DAGs cover (UTC; the hourly and daily DAGs catch up "
        "from it when unpaused: set it to when the deployment's streams started).",
        doc="2026-01-01T00:00Z",
    ),
    Variable(
        "WIDEHOUSE_SUPERVISOR_MODE",
        "local",
        _parse_supervisor_mode,
        "supervisor.mode",
        "Streams supervisor: `local` runs one detached `widehouse stream` process per slot group; "
        "`cluster` submits each group with spark-submit --deploy-mode cluster.",
    ),
    Variable(
        "WIDEHOUSE_SUPERVISOR_STALE_SECONDS",
        300.0,
        _parse_positive_float,
        "supervisor.stale_seconds",
        "Streams supervisor: an app whose last committed batch is older than this is stuck (restarted).",
    ),
    Variable(
        "WIDEHOUSE_SUPERVISOR_STARTUP_SECONDS",
        300.0,
        _parse_positive_float,
        "supervisor.startup_seconds",
        "Streams supervisor: time a (re)started app has to commit its first batch.",
    ),
    Variable(
        "WIDEHOUSE_SUPERVISOR_BACKOFF_SECONDS",
        30.0,
        _parse_non_negative_float,
        "supervisor.backoff_seconds",
        "Streams supervisor: wait before the first restart of a failed app; doubles per failure.",
    ),
    Variable(
        "WIDEHOUSE_SUPERVISOR_BACKOFF_MAX_SECONDS",
        1800.0,
        _parse_non_negative_float,
        "supervisor.backoff_max_seconds",
        "Streams supervisor: the longest wait between restarts.",
    ),
    Variable(
        "WIDEHOUSE_SUPERVISOR_MAX_FAILURES",
        5,
        _parse_positive_int,
        "supervisor.max_failures",
        "Streams supervisor: consecutive failures (no batch committed in between) before an app is "
        "reported and no longer restarted.",
    ),
    Variable(
        "WIDEHOUSE_SPARK_SUBMIT",
        "spark-submit",
        _parse_command,
        "supervisor.spark_submit",
        "Streams supervisor, cluster mode: the spark-submit executable.",
    ),
)

DERIVED_FIELDS: tuple[DerivedField, ...] = (
    DerivedField("local.state_dir", Derived("<state>", (STATE,), lambda r: r[STATE])),
    DerivedField(
        "hive.metastore_db_dir",
        _under_state("hive/metastore_db", "hive", "metastore_db", parse=str),
    ),
    DerivedField("spark.local_dir", _under_state("spark/tmp", "spark", "tmp", parse=str)),
    DerivedField("airflow.home", Derived("<state>/airflow", (STATE,), lambda r: r[STATE] / "airflow")),
)
"""Settings fields no variable sets; they follow from the variables named in ``uses``."""

_BY_NAME: dict[str, Variable[Any]] = {v.name: v for v in VARIABLES}
_BY_TARGET: dict[str, Variable[Any]] = {v.target: v for v in VARIABLES}


def _default(target: str) -> Any:
    """The table's default for a dataclass field (only for variables with a fixed default)."""
    default = _BY_TARGET[target].default
    if isinstance(default, Derived):  # a bug in this module: a derived default has no fixed value
        raise TypeError(f"{target} has a derived default")
    return default


# -- the config objects -------------------------------------------------------------------------


def _masked_repr(obj: Any, **masked: object) -> str:
    """The dataclass repr of ``obj`` with ``masked`` values shown instead of the real ones."""
    shown = (
        f"{f.name}={masked[f.name] if f.name in masked else getattr(obj, f.name)!r}"
        for f in dataclasses.fields(obj)
        if f.repr or f.name in masked
    )
    return f"{type(obj).__name__}({', '.join(shown)})"


@dataclass(frozen=True)
class PulsarSettings:
    service_url: str = field(repr=False)
    admin_url: str = field(repr=False)
    auth_token: str | None = field(default=_default("pulsar.auth_token"), repr=False)

    @property
    def display_service_url(self) -> str:
        """The service URL with any credentials masked, for logs, errors and status output."""
        return mask_url(self.service_url)

    @property
    def display_admin_url(self) -> str:
        """The admin URL with any credentials masked, for logs, errors and status output."""
        return mask_url(self.admin_url)

    def __repr__(self) -> str:
        return _masked_repr(
            self,
            service_url=self.display_service_url,
            admin_url=self.display_admin_url,
            auth_token=MASK if self.auth_token else None,
        )


@dataclass(frozen=True)
class ClickHouseSettings:
    dsn: str = field(repr=False)
    database: str = _default("clickhouse.database")

    @property
    def embedded(self) -> bool:
        """True for the in-process chDB engine, False for a ClickHouse server."""
        return self.dsn.startswith("chdb:")

    @property
    def display_dsn(self) -> str:
        """The DSN with any password masked, for logs and status output."""
        return mask_url(self.dsn)

    def __repr__(self) -> str:
        return _masked_repr(self, dsn=self.display_dsn)


@dataclass(frozen=True)
class DeltaSettings:
    root: str

    def path(self, *parts: str) -> str:
        """Join a table path under the root (works for local paths and URIs alike)."""
        return "/".join([self.root.rstrip("/"), *parts])


@dataclass(frozen=True)
class HBaseSettings:
    host: str
    port: int
    timeout_ms: int = _default("hbase.timeout_ms")
    salt_buckets: int = _default("hbase.salt_buckets")
    table_prefix: str = _default("hbase.table_prefix")
    zookeeper: str = field(default="127.0.0.1:2181", kw_only=True)
    """ZooKeeper quorum ``host:port[,host:port]``, for the admin tool that pre-splits day tables."""


@dataclass(frozen=True)
class HiveSettings:
    metastore_uri: str | None = field(repr=False)
    warehouse_dir: str
    metastore_db_dir: str
    """Directory of the embedded Derby metastore (used only when metastore_uri is None)."""

    def __repr__(self) -> str:
        uri = self.metastore_uri
        return _masked_repr(self, metastore_uri=mask_url(uri) if uri else uri)


@dataclass(frozen=True)
class SparkSettings:
    master: str = _default("spark.master")
    shuffle_partitions: int = _default("spark.shuffle_partitions")
    ui_enabled: bool = _default("spark.ui_enabled")
    driver_memory: str = _default("spark.driver_memory")
    jars: tuple[str, ...] = field(kw_only=True)
    extra_conf: tuple[tuple[str, str], ...] = field(default=_default("spark.extra_conf"), repr=False)
    local_dir: str | None = field(kw_only=True)

    @property
    def is_local(self) -> bool:
        return self.master.startswith("local")

    @property
    def display_conf(self) -> tuple[tuple[str, str], ...]:
        """``extra_conf`` with the values of credential-like keys (``...secret.key``) masked."""
        return tuple((k, MASK if is_secret_key(k) else mask_url(v)) for k, v in self.extra_conf)

    def __repr__(self) -> str:
        return _masked_repr(self, master=mask_url(self.master), extra_conf=self.display_conf)


@dataclass(frozen=True)
class LocalServicesSettings:
    """Ports, heaps and paths of the services `widehouse services` runs on loopback.

    ``java_home`` None means the ``java`` on PATH (what the table's default gives without JAVA_HOME).
    """

    state_dir: Path
    vendor_dir: Path
    java_home: str | None = field(default=None, kw_only=True)
    pulsar_broker_port: int = _default("local.pulsar_broker_port")
    pulsar_web_port: int = _default("local.pulsar_web_port")
    pulsar_heap: str = _default("local.pulsar_heap")
    pulsar_direct_memory: str = _default("local.pulsar_direct_memory")
    hbase_zk_port: int = _default("local.hbase_zk_port")
    hbase_master_port: int = _default("local.hbase_master_port")
    hbase_master_info_port: int = _default("local.hbase_master_info_port")
    hbase_regionserver_port: int = _default("local.hbase_regionserver_port")
    hbase_heap: str = _default("local.hbase_heap")
    hbase_thrift_port: int = _default("local.hbase_thrift_port")
    hbase_thrift_info_port: int = _default("local.hbase_thrift_info_port")
    hbase_thrift_heap: str = _default("local.hbase_thrift_heap")
    start_timeout: float = _default("local.start_timeout")
    clickhouse_port: int = _default("local.clickhouse_port")
    clickhouse_user: str = _default("local.clickhouse_user")
    clickhouse_password: str | None = field(default=None, repr=False)
    """None until ``widehouse services up`` generated one (or WIDEHOUSE_CLICKHOUSE_PASSWORD sets it)."""
    clickhouse_handles: int = _default("local.clickhouse_handles")

    @property
    def clickhouse_url(self) -> str:
        """URL of the local ClickHouse server, with its credentials (mask it before showing it)."""
        return _local_clickhouse_url(self.clickhouse_user, self.clickhouse_password, self.clickhouse_port)


@dataclass(frozen=True)
class PlannerSettings:
    """Knobs of the slot planner (:mod:`widehouse.planner` documents the model).

    Loads are bytes/s equivalents: ``byte_rate + msg_rate * message_cost``. Construction validates
    every field and raises :class:`ConfigError` naming it.
    """

    slot_capacity: float = _default("planner.slot_capacity")
    """Load one core carries (bytes/s equivalent); to be calibrated by the benchmarks."""
    message_cost: float = _default("planner.message_cost")
    """Bytes charged per message on top of its size."""
    target_fill: float = _default("planner.target_fill")
    """Packed groups are filled to ``target_fill * slot_capacity``; isolated topics get cores to match."""
    isolation: float = _default("planner.isolation")
    """Topics heavier than ``isolation * slot_capacity`` get a group of their own."""
    partition_capacity: float = _default("planner.partition_capacity")
    """Load one Pulsar partition is planned to carry."""
    max_partitions: int = _default("planner.max_partitions")
    """Most partitions planned for a topic (a topic that already has more keeps them)."""
    max_group_topics: int = _default("planner.max_group_topics")
    """Most topics in one packed group."""
    imbalance: float = _default("planner.imbalance")
    """Drift tolerated before a replan moves topics (over the target load, over the fewest groups)."""
    smoothing: int = _default("planner.smoothing")
    """Live traffic: median of the last ``smoothing`` observations."""

    def __post_init__(self) -> None:
        checks: tuple[tuple[str, bool, str], ...] = (
            ("slot_capacity", self.slot_capacity > 0, "must be > 0"),
            ("message_cost", self.message_cost >= 0, "must be >= 0"),
            ("target_fill", 0 < self.target_fill <= 1, "must be in (0, 1]"),
            ("isolation", 0 < self.isolation <= 1, "must be in (0, 1]"),
            ("partition_capacity", self.partition_capacity > 0, "must be > 0"),
            ("max_partitions", self.max_partitions >= 1, "must be >= 1"),
            ("max_group_topics", self.max_group_topics >= 1, "must be >= 1"),
            ("imbalance", self.imbalance >= 0, "must be >= 0"),
            ("smoothing", self.smoothing >= 1, "must be >= 1"),
        )
        for name, ok, rule in checks:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise ConfigError(f"planner setting {name}={value!r} must be a finite number")
            if not ok:
                raise ConfigError(f"planner setting {name}={value!r} {rule}")
        if self.isolation > self.target_fill:
            raise ConfigError(
                f"planner setting isolation={self.isolation!r} must be <= target_fill={self.target_fill!r}: "
                "a topic too heavy to pack under the target fill has to be isolated"
            )


@dataclass(frozen=True)
class StreamSettings:
    """Knobs of the streaming wide-table job (per app; a slot group is one query of it)."""

    app: str = _default("stream.app")
    tenant_suffix: str | None = _default("stream.tenant_suffix")
    """Topics live in ``<tenant>-<suffix>`` instead of the catalog's tenants (see Catalog.relocated)."""
    checkpoint_root: str = field(kw_only=True)
    trigger_seconds: float = _default("stream.trigger_seconds")
    max_messages: int = _default("stream.max_messages")
    sinks: tuple[str, ...] = _default("stream.sinks")
    stop_grace_seconds: float = _default("stream.stop_grace_seconds")
    max_restarts: int = _default("stream.max_restarts")
    restart_backoff_s: float = _default("stream.restart_backoff_s")
    restart_backoff_max_s: float = _default("stream.restart_backoff_max_s")
    dead_letter: bool = _default("stream.dead_letter")
    """Forward quarantined messages to ``<topic>-DLQ`` (:mod:`widehouse.stream.deadletter`)."""
    control_topic: str | None = _default("stream.control_topic")
    """Where groups publish committed watermarks (:mod:`widehouse.stream.control`); None: nowhere."""

    def __post_init__(self) -> None:
        if self.restart_backoff_s > self.restart_backoff_max_s:
            raise ConfigError(
                f"WIDEHOUSE_STREAM_RESTART_BACKOFF_SECONDS={self.restart_backoff_s!r} must be <= "
                f"WIDEHOUSE_STREAM_RESTART_BACKOFF_MAX_SECONDS={self.restart_backoff_max_s!r} (its cap)"
            )

    def checkpoint(self, group: str) -> str:
        """Checkpoint location of one slot group."""
        return f"{self.checkpoint_root.rstrip('/')}/{self.app}/{group}"


@dataclass(frozen=True)
class AirflowSettings:
    """The local Airflow `widehouse airflow up` runs (API server, scheduler, DAG processor, triggerer)."""

    home: Path
    dags_dir: Path
    connections_file: Path | None = field(kw_only=True)
    port: int = _default("airflow.port")
    worker_log_port: int = _default("airflow.worker_log_port")
    triggerer_log_port: int = _default("airflow.triggerer_log_port")
    user: str = _default("airflow.user")
    password: str | None = field(default=None, repr=False)
    """None until ``widehouse airflow up`` generated one (or WIDEHOUSE_AIRFLOW_PASSWORD sets it)."""
    start: dt.datetime = field(default=_default("airflow.start"))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@dataclass(frozen=True)
class SupervisorSettings:
    """How the streams supervisor runs slot groups and when it restarts them."""

    mode: str = _default("supervisor.mode")
    stale_seconds: float = _default("supervisor.stale_seconds")
    startup_seconds: float = _default("supervisor.startup_seconds")
    backoff_seconds: float = _default("supervisor.backoff_seconds")
    backoff_max_seconds: float = _default("supervisor.backoff_max_seconds")
    max_failures: int = _default("supervisor.max_failures")
    spark_submit: str = _default("supervisor.spark_submit")


@dataclass(frozen=True)
class Settings:
    """Everything a Widehouse process needs to know about its environment."""

    state_dir: Path
    schemas_dir: Path
    pulsar: PulsarSettings
    clickhouse: ClickHouseSettings
    delta: DeltaSettings
    hbase: HBaseSettings
    hive: HiveSettings
    spark: SparkSettings
    local: LocalServicesSettings
    planner: PlannerSettings
    stream: StreamSettings
    airflow: AirflowSettings
    supervisor: SupervisorSettings


_GROUPS: dict[str, Callable[..., Any]] = {
    "pulsar": PulsarSettings,
    "clickhouse": ClickHouseSettings,
    "delta": DeltaSettings,
    "hbase": HBaseSettings,
    "hive": HiveSettings,
    "spark": SparkSettings,
    "local": LocalServicesSettings,
    "planner": PlannerSettings,
    "stream": StreamSettings,
    "airflow": AirflowSettings,
    "supervisor": SupervisorSettings,
}


# -- loading ------------------------------------------------------------------------------------


class _Resolver:
    """Resolves variables (set value, else default) once each, in dependency order."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self._environ = environ
        self._values: dict[str, Any] = {}
        self._resolving: set[str] = set()

    def raw(self, name: str) -> str | None:
        """The stripped text of an environment variable; None when unset or blank."""
        value = self._environ.get(name)
        if value is None:
            return None
        return value.strip() or None

    def value(self, name: str) -> Any:
        if name not in self._values:
            if name in self._resolving:  # a bug in the table, not user input
                raise RuntimeError(f"derived defaults form a cycle through {name}")
            self._resolving.add(name)
            self._values[name] = self._resolve(_BY_NAME[name])
            self._resolving.discard(name)
        return self._values[name]

    def scope(self, derived: Derived[Any]) -> dict[str, Any]:
        return {n: self.value(n) if n in _BY_NAME else self.raw(n) for n in derived.uses}

    def _resolve(self, var: Variable[Any]) -> Any:
        text = self.raw(var.name)
        if text is None and var.blank_is_value and var.name in self._environ:
            text = ""
        if text is not None:
            try:
                return var.parse(text)
            except (ValueError, ConfigError) as exc:
                error = ConfigError(f"{var.shown(text)} is invalid: {exc}")
                if var.secret:  # the cause could quote the value: keep it out of tracebacks
                    raise error from None
                raise error from exc
        if not isinstance(var.default, Derived):
            return var.default
        try:
            return var.default.compute(self.scope(var.default))
        except (ValueError, ConfigError) as exc:
            raise ConfigError(
                f"{var.name} is not set and its default ({var.documented_default}) is invalid: {exc}; "
                f"set {var.name}"
            ) from exc


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """Build :class:`Settings` from ``WIDEHOUSE_*`` variables (``os.environ`` by default).

    Raises :class:`ConfigError` naming the variable (and its value, unless it is a secret) when one is
    invalid.
    """
    resolver = _Resolver(os.environ if environ is None else environ)
    leaves = {var.target: resolver.value(var.name) for var in VARIABLES}
    for derived in DERIVED_FIELDS:
        leaves[derived.target] = derived.default.compute(resolver.scope(derived.default))
    _check_distinct_ports(resolver)

    top: dict[str, Any] = {}
    groups: dict[str, dict[str, Any]] = {name: {} for name in _GROUPS}
    for target, value in leaves.items():
        group, _, leaf = target.partition(".")
        if leaf:
            groups[group][leaf] = value
        else:
            top[group] = value
    for group, build in _GROUPS.items():
        try:
            top[group] = build(**groups[group])
        except ConfigError as exc:  # a cross-field check of the group (planner: isolation <= fill)
            raise ConfigError(f"{_group_variables(group)} settings: {exc}") from exc
    return Settings(**top)


@dataclass(frozen=True)
class CreatedSecret:
    """A local password :func:`create_local_secrets` has just generated (report it once)."""

    variable: str
    """The variable that would have set it (``WIDEHOUSE_CLICKHOUSE_PASSWORD``)."""
    what: str
    path: Path
    value: str = field(repr=False)


LOCAL_SECRETS: dict[str, tuple[str, str]] = {
    private.CLICKHOUSE_PASSWORD: ("WIDEHOUSE_CLICKHOUSE_PASSWORD", "local ClickHouse password"),
    private.AIRFLOW_PASSWORD: ("WIDEHOUSE_AIRFLOW_PASSWORD", "local Airflow password"),
}
"""The passwords generated per state dir: file name -> (the variable that overrides it, what it is)."""


def create_local_secrets(
    names: tuple[str, ...], environ: Mapping[str, str] | None = None
) -> list[CreatedSecret]:
    """Generate the local passwords ``names`` (keys of :data:`LOCAL_SECRETS`) that neither their
    variable nor the state dir already holds; returns those it generated.

    Only the commands that start a local service call this (``widehouse services up``, ``widehouse
    airflow up``): loading settings never writes, so ``widehouse config``, DAG parsing and executors
    stay side-effect free. Load the settings again afterwards to see the new values.
    """
    resolver = _Resolver(os.environ if environ is None else environ)
    state_dir: Path = resolver.value(STATE)
    created: list[CreatedSecret] = []
    for name in names:
        variable, what = LOCAL_SECRETS[name]
        if resolver.raw(variable) is not None:  # an explicit value always wins: nothing to generate
            continue
        value, new = private.ensure_secret(state_dir, name)
        if new:
            created.append(CreatedSecret(variable, what, private.secret_path(state_dir, name), value))
    return created


def _group_variables(group: str) -> str:
    """``WIDEHOUSE_PLAN_*``: the common prefix of the variables of one settings group."""
    words = [v.name.split("_") for v in VARIABLES if v.target.startswith(f"{group}.")]
    common: list[str] = []
    for parts in zip(*words, strict=False):
        if len(set(parts)) != 1:
            break
        common.append(parts[0])
    return "_".join([*common, "*"])


def _check_distinct_ports(resolver: _Resolver) -> None:
    seen: dict[int, str] = {}
    for var in VARIABLES:
        if var.parse is not _parse_port or not var.target.startswith(("local.", "airflow.")):
            continue
        port = resolver.value(var.name)
        if port in seen:
            raise ConfigError(
                f"{seen[port]} and {var.name} are both {port}; every local service port must differ"
            )
        seen[port] = var.name


def describe(settings: Settings, show_secrets: bool = False) -> list[tuple[str, str]]:
    """(name, effective value) pairs for `widehouse config`; secrets masked unless ``show_secrets``."""
    s = settings

    def url(value: str) -> str:
        return value if show_secrets else mask_url(value)

    def secret(value: str | None, missing: str) -> str:
        if value is None:
            return missing
        return value if show_secrets else MASK

    return [
        ("state dir", str(s.state_dir)),
        ("vendor dir", str(s.local.vendor_dir)),
        ("schemas dir", str(s.schemas_dir)),
        ("pulsar service url", url(s.pulsar.service_url)),
        ("pulsar admin url", url(s.pulsar.admin_url)),
        ("pulsar auth token", secret(s.pulsar.auth_token, "(none)")),
        ("clickhouse dsn", url(s.clickhouse.dsn)),
        ("clickhouse database", s.clickhouse.database),
        (
            "local clickhouse",
            f"127.0.0.1:{s.local.clickhouse_port}, user {s.local.clickhouse_user}, password "
            + secret(s.local.clickhouse_password, "(none yet: `widehouse services up` generates it)"),
        ),
        ("delta root", s.delta.root),
        ("hbase thrift", f"{s.hbase.host}:{s.hbase.port}"),
        ("hive metastore", url(s.hive.metastore_uri or "") or f"embedded ({s.hive.metastore_db_dir})"),
        ("hive warehouse", s.hive.warehouse_dir),
        ("spark master", url(s.spark.master)),
        ("spark jars", ", ".join(s.spark.jars) or "(none)"),
        (
            "slot planner",
            f"capacity {s.planner.slot_capacity:,.0f} B/s, message cost {s.planner.message_cost:,.0f} B, "
            f"target fill {s.planner.target_fill:g}, isolation {s.planner.isolation:g}, "
            f"partition capacity {s.planner.partition_capacity:,.0f} B/s",
        ),
        (
            "local airflow",
            f"{s.airflow.url}, user {s.airflow.user}, password "
            + secret(s.airflow.password, "(none yet: `widehouse airflow up` generates it)"),
        ),
    ]

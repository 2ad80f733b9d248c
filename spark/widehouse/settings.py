"""The one place that reads the environment.

Every ``WIDEHOUSE_*`` variable is declared once in :data:`VARIABLES` (name, default, meaning);
:func:`load_settings` parses and validates them into frozen config objects, and everything else in
Widehouse receives those objects (or plain values taken from them). Airflow passes its Connections
to jobs as these same variables at run time, so a job runs the same from a shell, a DAG or a test.

Defaults describe the local mode: services on loopback, state under ``<checkout>/.state``,
ClickHouse embedded (chDB), Hive metastore embedded. Point any of them at a cluster by setting the
variable; nothing in the code assumes local mode.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar
from urllib.parse import urlsplit, urlunsplit

from widehouse import paths
from widehouse.errors import ConfigError

T = TypeVar("T")


@dataclass(frozen=True)
class Variable:
    """One environment variable: its name, default (as documented) and meaning."""

    name: str
    default: str
    help: str
    secret: bool = False


VARIABLES: tuple[Variable, ...] = (
    Variable(
        "WIDEHOUSE_STATE_DIR",
        "<checkout>/.state",
        "Local state: service data, logs, pid files, chDB data, Delta tables, Hive metastore, checkpoints.",
    ),
    Variable(
        "WIDEHOUSE_VENDOR_DIR",
        "<checkout>/.vendor",
        "JVM parts resolved by `make setup` (Pulsar distribution, HBase jars, Delta jars, Maven repository).",
    ),
    Variable("WIDEHOUSE_SCHEMAS_DIR", "<checkout>/schemas", "The topic and wide-table catalog."),
    Variable(
        "WIDEHOUSE_PULSAR_SERVICE_URL",
        "pulsar://127.0.0.1:<pulsar broker port>",
        "Pulsar binary protocol URL (pulsar:// or pulsar+ssl://).",
    ),
    Variable(
        "WIDEHOUSE_PULSAR_ADMIN_URL",
        "http://127.0.0.1:<pulsar web port>",
        "Pulsar admin REST URL (http:// or https://).",
    ),
    Variable("WIDEHOUSE_PULSAR_AUTH_TOKEN", "(none)", "JWT for Pulsar token authentication.", secret=True),
    Variable(
        "WIDEHOUSE_CLICKHOUSE_DSN",
        "chdb://<state>/clickhouse",
        "ClickHouse: `chdb:///abs/path` for the embedded engine, or "
        "`http(s)://user:pass@host:8123/db` for a server.",
        secret=True,
    ),
    Variable(
        "WIDEHOUSE_CLICKHOUSE_DATABASE",
        "wh",
        "ClickHouse database for Widehouse tables (a database in the DSN path wins).",
    ),
    Variable(
        "WIDEHOUSE_DELTA_ROOT",
        "<state>/delta",
        "Root path or URI of the Delta tables (bronze/, silver/ below it).",
    ),
    Variable("WIDEHOUSE_HBASE_HOST", "127.0.0.1", "HBase Thrift (v1) server host."),
    Variable("WIDEHOUSE_HBASE_PORT", "<hbase thrift port>", "HBase Thrift (v1) server port."),
    Variable("WIDEHOUSE_HBASE_TIMEOUT_MS", "60000", "HBase Thrift socket timeout in milliseconds."),
    Variable(
        "WIDEHOUSE_HIVE_METASTORE_URI",
        "(embedded Derby)",
        "thrift:// URI of a Hive metastore; empty means Spark's embedded metastore under the state dir.",
    ),
    Variable("WIDEHOUSE_HIVE_WAREHOUSE", "<state>/hive/warehouse", "Hive / Spark SQL warehouse dir."),
    Variable("WIDEHOUSE_SPARK_MASTER", "local[*]", "Spark master URL (local[N], spark://, yarn, k8s://)."),
    Variable("WIDEHOUSE_SPARK_SHUFFLE_PARTITIONS", "4", "spark.sql.shuffle.partitions."),
    Variable("WIDEHOUSE_SPARK_UI", "false", "Start the Spark UI (true/false)."),
    Variable("WIDEHOUSE_SPARK_DRIVER_MEMORY", "2g", "spark.driver.memory (heap of the driver JVM)."),
    Variable(
        "WIDEHOUSE_SPARK_JARS",
        "(Delta jars in the vendor dir)",
        "Comma-separated jars for spark.jars; set empty on a cluster that ships Delta itself.",
    ),
    Variable(
        "WIDEHOUSE_SPARK_CONF",
        "(none)",
        "Extra Spark settings, `key=value` pairs separated "
        "by newlines or `;`; they win over every other Spark setting.",
    ),
    Variable("WIDEHOUSE_JAVA_HOME", "(JAVA_HOME, or java on PATH)", "JDK 17+ used for the local services."),
    Variable("WIDEHOUSE_PULSAR_BROKER_PORT", "6650", "Local Pulsar standalone: binary protocol port."),
    Variable(
        "WIDEHOUSE_PULSAR_WEB_PORT",
        "8090",
        "Local Pulsar standalone: admin REST / web port (not 8080, which Airflow's API server takes).",
    ),
    Variable("WIDEHOUSE_PULSAR_HEAP", "512m", "Local Pulsar standalone: JVM heap (-Xmx)."),
    Variable("WIDEHOUSE_PULSAR_DIRECT_MEMORY", "512m", "Local Pulsar standalone: JVM direct memory."),
    Variable("WIDEHOUSE_HBASE_ZK_PORT", "2181", "Local HBase: embedded ZooKeeper client port."),
    Variable("WIDEHOUSE_HBASE_MASTER_PORT", "16000", "Local HBase: master RPC port."),
    Variable("WIDEHOUSE_HBASE_MASTER_INFO_PORT", "16010", "Local HBase: master web/JMX port (health)."),
    Variable("WIDEHOUSE_HBASE_REGIONSERVER_PORT", "16020", "Local HBase: region server RPC port."),
    Variable("WIDEHOUSE_HBASE_HEAP", "768m", "Local HBase (master + region server + ZooKeeper): heap."),
    Variable("WIDEHOUSE_HBASE_THRIFT_PORT", "9090", "Local HBase Thrift (v1) server port."),
    Variable("WIDEHOUSE_HBASE_THRIFT_INFO_PORT", "9095", "Local HBase Thrift server web port."),
    Variable("WIDEHOUSE_HBASE_THRIFT_HEAP", "256m", "Local HBase Thrift server: JVM heap."),
    Variable("WIDEHOUSE_SERVICE_START_TIMEOUT", "180", "Seconds a local service may take to become healthy."),
    Variable(
        "WIDEHOUSE_PLAN_SLOT_CAPACITY",
        "20000000",
        "Slot planner: load one core carries, in bytes/s (a message counts its bytes plus the message cost).",
    ),
    Variable(
        "WIDEHOUSE_PLAN_MESSAGE_COST",
        "500",
        "Slot planner: bytes charged per message on top of its size, so tiny high-rate topics count.",
    ),
    Variable(
        "WIDEHOUSE_PLAN_TARGET_FILL",
        "0.8",
        "Slot planner: share of a core's capacity that packed groups (and isolated topics) are planned to.",
    ),
    Variable(
        "WIDEHOUSE_PLAN_ISOLATION",
        "0.5",
        "Slot planner: topics heavier than this share of a core get a group of their own (<= target fill).",
    ),
    Variable(
        "WIDEHOUSE_PLAN_PARTITION_CAPACITY",
        "5000000",
        "Slot planner: load one Pulsar partition is planned to carry, in bytes/s.",
    ),
    Variable("WIDEHOUSE_PLAN_MAX_PARTITIONS", "64", "Slot planner: most partitions it plans for a topic."),
    Variable("WIDEHOUSE_PLAN_MAX_GROUP_TOPICS", "1000", "Slot planner: most topics in one packed group."),
    Variable(
        "WIDEHOUSE_PLAN_IMBALANCE",
        "0.25",
        "Slot planner: drift tolerated (over the target load, over the fewest groups) before a replan "
        "moves topics.",
    ),
    Variable(
        "WIDEHOUSE_PLAN_SMOOTHING",
        "5",
        "Slot planner: live traffic is the median of the last N stats observations kept in the state dir.",
    ),
    Variable(
        "WIDEHOUSE_TENANT_SUFFIX",
        "(none)",
        "Run against copies of the catalog's tenants named "
        "<tenant>-<suffix> (a staging deployment, an isolated test run); the generator's --tenant-suffix.",
    ),
    Variable(
        "WIDEHOUSE_STREAM_APP",
        "widehouse",
        "Streaming: application id; prefixes Pulsar subscriptions, "
        "ClickHouse insert deduplication tokens and Delta txnAppIds (one per deployment).",
    ),
    Variable(
        "WIDEHOUSE_STREAM_CHECKPOINT_ROOT",
        "<state>/checkpoints",
        "Streaming: checkpoint root; each "
        "slot group checkpoints under <root>/<app>/<group> (a cluster path on a cluster).",
    ),
    Variable("WIDEHOUSE_STREAM_TRIGGER_SECONDS", "10", "Streaming: micro-batch trigger interval in seconds."),
    Variable(
        "WIDEHOUSE_STREAM_MAX_MESSAGES",
        "500000",
        "Streaming: admission budget, messages per micro-batch over all topics of a group.",
    ),
    Variable("WIDEHOUSE_STREAM_SINKS", "clickhouse,delta", "Streaming: sinks to write (clickhouse, delta)."),
    Variable(
        "WIDEHOUSE_STREAM_STOP_GRACE_SECONDS",
        "30",
        "Streaming: on SIGTERM, wait this long for the running "
        "micro-batch to finish before stopping (an unfinished batch is replayed on restart).",
    ),
    Variable(
        "WIDEHOUSE_STREAM_MAX_RESTARTS",
        "3",
        "Streaming: restarts of a failed query from its checkpoint "
        "before the app gives up (0 = fail at once).",
    ),
)

_KNOWN = {v.name for v in VARIABLES}
_HEAP_RE = re.compile(r"^[1-9][0-9]*[kKmMgG]$")
_CONF_KEY_RE = re.compile(r"^[A-Za-z0-9_.\-]+$")


@dataclass(frozen=True)
class PulsarSettings:
    service_url: str
    admin_url: str
    auth_token: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class ClickHouseSettings:
    dsn: str = field(repr=False)
    database: str = "wh"

    @property
    def embedded(self) -> bool:
        """True for the in-process chDB engine, False for a ClickHouse server."""
        return self.dsn.startswith("chdb:")

    @property
    def display_dsn(self) -> str:
        """The DSN with any password masked, for logs and status output."""
        return mask_url(self.dsn)


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
    timeout_ms: int = 60000


@dataclass(frozen=True)
class HiveSettings:
    metastore_uri: str | None
    warehouse_dir: str
    metastore_db_dir: str
    """Directory of the embedded Derby metastore (used only when metastore_uri is None)."""


@dataclass(frozen=True)
class SparkSettings:
    master: str = "local[*]"
    shuffle_partitions: int = 4
    ui_enabled: bool = False
    driver_memory: str = "2g"
    jars: tuple[str, ...] = ()
    extra_conf: tuple[tuple[str, str], ...] = ()
    local_dir: str | None = None

    @property
    def is_local(self) -> bool:
        return self.master.startswith("local")


@dataclass(frozen=True)
class LocalServicesSettings:
    """Ports, heaps and paths of the services `widehouse services` runs on loopback."""

    state_dir: Path
    vendor_dir: Path
    java_home: str | None = None
    pulsar_broker_port: int = 6650
    pulsar_web_port: int = 8090
    pulsar_heap: str = "512m"
    pulsar_direct_memory: str = "512m"
    hbase_zk_port: int = 2181
    hbase_master_port: int = 16000
    hbase_master_info_port: int = 16010
    hbase_regionserver_port: int = 16020
    hbase_heap: str = "768m"
    hbase_thrift_port: int = 9090
    hbase_thrift_info_port: int = 9095
    hbase_thrift_heap: str = "256m"
    start_timeout: float = 180.0


@dataclass(frozen=True)
class PlannerSettings:
    """Knobs of the slot planner (:mod:`widehouse.planner` documents the model).

    Loads are bytes/s equivalents: ``byte_rate + msg_rate * message_cost``. Construction validates
    every field and raises :class:`ConfigError` naming it.
    """

    slot_capacity: float = 20_000_000.0
    """Load one core carries (bytes/s equivalent); to be calibrated by the benchmarks."""
    message_cost: float = 500.0
    """Bytes charged per message on top of its size."""
    target_fill: float = 0.8
    """Packed groups are filled to ``target_fill * slot_capacity``; isolated topics get cores to match."""
    isolation: float = 0.5
    """Topics heavier than ``isolation * slot_capacity`` get a group of their own."""
    partition_capacity: float = 5_000_000.0
    """Load one Pulsar partition is planned to carry."""
    max_partitions: int = 64
    """Most partitions planned for a topic (a topic that already has more keeps them)."""
    max_group_topics: int = 1000
    """Most topics in one packed group."""
    imbalance: float = 0.25
    """Drift tolerated before a replan moves topics (over the target load, over the fewest groups)."""
    smoothing: int = 5
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


STREAM_SINKS = ("clickhouse", "delta")


@dataclass(frozen=True)
class StreamSettings:
    """Knobs of the streaming wide-table job (per app; a slot group is one query of it)."""

    app: str = "widehouse"
    tenant_suffix: str | None = None
    """Topics live in ``<tenant>-<suffix>`` instead of the catalog's tenants (see Catalog.relocated)."""
    checkpoint_root: str = ""
    trigger_seconds: float = 10.0
    max_messages: int = 500_000
    sinks: tuple[str, ...] = STREAM_SINKS
    stop_grace_seconds: float = 30.0
    max_restarts: int = 3

    def checkpoint(self, group: str) -> str:
        """Checkpoint location of one slot group."""
        return f"{self.checkpoint_root.rstrip('/')}/{self.app}/{group}"


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
    planner: PlannerSettings = field(default_factory=PlannerSettings)
    stream: StreamSettings = field(default_factory=StreamSettings)


def mask_url(url: str) -> str:
    """Replace the password of a URL with ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


class _Env:
    """Reads and validates variables; every error names the variable and the bad value."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self._environ = environ

    def raw(self, name: str) -> str | None:
        if name not in _KNOWN:  # a typo here is a bug in this module, not user input
            raise KeyError(name)
        value = self._environ.get(name)
        if value is None:
            return None
        value = value.strip()
        return value or None

    def get(self, name: str, default: T, parse: Callable[[str], T]) -> T:
        value = self.raw(name)
        if value is None:
            return default
        try:
            return parse(value)
        except (ValueError, ConfigError) as exc:
            raise ConfigError(f"{name}={value!r} is invalid: {exc}") from exc

    def port(self, name: str, default: int) -> int:
        return self.get(name, default, _parse_port)

    def heap(self, name: str, default: str) -> str:
        return self.get(name, default, _parse_heap)


def _parse_port(value: str) -> int:
    port = int(value)
    if not 1 <= port <= 65535:
        raise ValueError("a port must be between 1 and 65535")
    return port


def _parse_heap(value: str) -> str:
    if not _HEAP_RE.match(value):
        raise ValueError("expected a JVM size such as 512m or 2g")
    return value.lower()


def _parse_positive_int(value: str) -> int:
    number = int(value)
    if number <= 0:
        raise ValueError("must be a positive integer")
    return number


def _parse_positive_float(value: str) -> float:
    number = float(value)
    if number <= 0:
        raise ValueError("must be a positive number")
    return number


def _parse_app_id(value: str) -> str:
    if not re.fullmatch(r"[a-z][a-z0-9_-]{0,31}", value):
        raise ValueError("must be lowercase letters, digits, '-' or '_', starting with a letter (max 32)")
    return value


def _parse_tenant_suffix(value: str) -> str:
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,30}", value):
        raise ValueError("must be 1-31 lowercase letters, digits or '-'")
    return value


def _parse_sinks(value: str) -> tuple[str, ...]:
    sinks = tuple(dict.fromkeys(s.strip() for s in value.split(",") if s.strip()))
    unknown = [s for s in sinks if s not in STREAM_SINKS]
    if unknown or not sinks:
        raise ValueError(f"sinks are a comma list of {', '.join(STREAM_SINKS)}")
    return sinks


def _parse_non_negative_int(value: str) -> int:
    number = int(value)
    if number < 0:
        raise ValueError("must be >= 0")
    return number


def _parse_non_negative_float(value: str) -> float:
    number = float(value)
    if not number >= 0 or number == float("inf"):
        raise ValueError("must be a finite number >= 0")
    return number


def _parse_fraction(value: str) -> float:
    number = float(value)
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


def _url_parser(*schemes: str) -> Callable[[str], str]:
    def parse(value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in schemes:
            raise ValueError(f"scheme must be one of {', '.join(schemes)}")
        if not parts.netloc:
            raise ValueError("missing host")
        return value.rstrip("/")

    return parse


def _parse_clickhouse_dsn(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme == "chdb":
        location = parts.netloc or parts.path
        if not location:
            raise ValueError("a chdb DSN needs a location: chdb:///absolute/path or chdb://memory")
        return value
    if parts.scheme in {"http", "https"}:
        if not parts.hostname:
            raise ValueError("missing host")
        return value
    raise ValueError("scheme must be chdb, http or https")


def _parse_spark_conf(value: str) -> tuple[tuple[str, str], ...]:
    pairs: list[tuple[str, str]] = []
    for raw_item in re.split(r"[;\n]", value):
        item = raw_item.strip()
        if not item:
            continue
        key, sep, conf_value = item.partition("=")
        key = key.strip()
        if not sep or not _CONF_KEY_RE.match(key):
            raise ValueError(f"{item!r} is not a key=value pair")
        pairs.append((key, conf_value.strip()))
    return tuple(pairs)


def _parse_identifier(value: str) -> str:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,62}", value):
        raise ValueError("must be a plain identifier (letters, digits, underscore)")
    return value


def _parse_jars(value: str) -> tuple[str, ...]:
    return tuple(j.strip() for j in value.split(",") if j.strip())


def default_delta_jars(vendor_dir: Path) -> tuple[str, ...]:
    """The Delta jars `make setup` resolved; empty when setup has not run (checked at session start)."""
    return tuple(str(p) for p in sorted((vendor_dir / "delta").glob("*.jar")))


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """Build :class:`Settings` from ``WIDEHOUSE_*`` variables (``os.environ`` by default).

    Raises :class:`ConfigError` naming the variable and its value when one is invalid.
    """
    source = os.environ if environ is None else environ
    env = _Env(source)

    state_dir = env.get("WIDEHOUSE_STATE_DIR", paths.default_state_dir(), _parse_dir)
    vendor_dir = env.get("WIDEHOUSE_VENDOR_DIR", paths.default_vendor_dir(), _parse_dir)
    schemas_dir = env.get("WIDEHOUSE_SCHEMAS_DIR", paths.default_schemas_dir(), _parse_dir)

    local = LocalServicesSettings(
        state_dir=state_dir,
        vendor_dir=vendor_dir,
        java_home=env.raw("WIDEHOUSE_JAVA_HOME") or source.get("JAVA_HOME") or None,
        pulsar_broker_port=env.port("WIDEHOUSE_PULSAR_BROKER_PORT", 6650),
        pulsar_web_port=env.port("WIDEHOUSE_PULSAR_WEB_PORT", 8090),
        pulsar_heap=env.heap("WIDEHOUSE_PULSAR_HEAP", "512m"),
        pulsar_direct_memory=env.heap("WIDEHOUSE_PULSAR_DIRECT_MEMORY", "512m"),
        hbase_zk_port=env.port("WIDEHOUSE_HBASE_ZK_PORT", 2181),
        hbase_master_port=env.port("WIDEHOUSE_HBASE_MASTER_PORT", 16000),
        hbase_master_info_port=env.port("WIDEHOUSE_HBASE_MASTER_INFO_PORT", 16010),
        hbase_regionserver_port=env.port("WIDEHOUSE_HBASE_REGIONSERVER_PORT", 16020),
        hbase_heap=env.heap("WIDEHOUSE_HBASE_HEAP", "768m"),
        hbase_thrift_port=env.port("WIDEHOUSE_HBASE_THRIFT_PORT", 9090),
        hbase_thrift_info_port=env.port("WIDEHOUSE_HBASE_THRIFT_INFO_PORT", 9095),
        hbase_thrift_heap=env.heap("WIDEHOUSE_HBASE_THRIFT_HEAP", "256m"),
        start_timeout=env.get("WIDEHOUSE_SERVICE_START_TIMEOUT", 180.0, _parse_positive_float),
    )
    _check_distinct_ports(local)

    pulsar = PulsarSettings(
        service_url=env.get(
            "WIDEHOUSE_PULSAR_SERVICE_URL",
            f"pulsar://127.0.0.1:{local.pulsar_broker_port}",
            _url_parser("pulsar", "pulsar+ssl"),
        ),
        admin_url=env.get(
            "WIDEHOUSE_PULSAR_ADMIN_URL",
            f"http://127.0.0.1:{local.pulsar_web_port}",
            _url_parser("http", "https"),
        ),
        auth_token=env.raw("WIDEHOUSE_PULSAR_AUTH_TOKEN"),
    )

    clickhouse = ClickHouseSettings(
        dsn=env.get("WIDEHOUSE_CLICKHOUSE_DSN", f"chdb://{state_dir / 'clickhouse'}", _parse_clickhouse_dsn),
        database=env.get("WIDEHOUSE_CLICKHOUSE_DATABASE", "wh", _parse_identifier),
    )

    hbase = HBaseSettings(
        host=env.raw("WIDEHOUSE_HBASE_HOST") or "127.0.0.1",
        port=env.port("WIDEHOUSE_HBASE_PORT", local.hbase_thrift_port),
        timeout_ms=env.get("WIDEHOUSE_HBASE_TIMEOUT_MS", 60000, _parse_positive_int),
    )

    hive = HiveSettings(
        metastore_uri=env.get("WIDEHOUSE_HIVE_METASTORE_URI", None, _url_parser("thrift")),
        warehouse_dir=env.raw("WIDEHOUSE_HIVE_WAREHOUSE") or str(state_dir / "hive" / "warehouse"),
        metastore_db_dir=str(state_dir / "hive" / "metastore_db"),
    )

    jars_raw = env.raw("WIDEHOUSE_SPARK_JARS")
    spark = SparkSettings(
        master=env.raw("WIDEHOUSE_SPARK_MASTER") or "local[*]",
        shuffle_partitions=env.get("WIDEHOUSE_SPARK_SHUFFLE_PARTITIONS", 4, _parse_positive_int),
        ui_enabled=env.get("WIDEHOUSE_SPARK_UI", False, _parse_bool),
        driver_memory=env.heap("WIDEHOUSE_SPARK_DRIVER_MEMORY", "2g"),
        # An explicitly empty WIDEHOUSE_SPARK_JARS means "no extra jars" (a cluster that ships Delta).
        jars=_parse_jars(jars_raw)
        if jars_raw is not None
        else (() if "WIDEHOUSE_SPARK_JARS" in source else default_delta_jars(vendor_dir)),
        extra_conf=env.get("WIDEHOUSE_SPARK_CONF", (), _parse_spark_conf),
        local_dir=str(state_dir / "spark" / "tmp"),
    )

    planner = _load_planner(env)

    return Settings(
        state_dir=state_dir,
        schemas_dir=schemas_dir,
        pulsar=pulsar,
        clickhouse=clickhouse,
        delta=DeltaSettings(root=env.raw("WIDEHOUSE_DELTA_ROOT") or str(state_dir / "delta")),
        hbase=hbase,
        hive=hive,
        spark=spark,
        local=local,
        planner=planner,
        stream=StreamSettings(
            app=env.get("WIDEHOUSE_STREAM_APP", "widehouse", _parse_app_id),
            tenant_suffix=env.get("WIDEHOUSE_TENANT_SUFFIX", None, _parse_tenant_suffix),
            checkpoint_root=env.raw("WIDEHOUSE_STREAM_CHECKPOINT_ROOT") or str(state_dir / "checkpoints"),
            trigger_seconds=env.get("WIDEHOUSE_STREAM_TRIGGER_SECONDS", 10.0, _parse_positive_float),
            max_messages=env.get("WIDEHOUSE_STREAM_MAX_MESSAGES", 500_000, _parse_positive_int),
            sinks=env.get("WIDEHOUSE_STREAM_SINKS", STREAM_SINKS, _parse_sinks),
            stop_grace_seconds=env.get("WIDEHOUSE_STREAM_STOP_GRACE_SECONDS", 30.0, _parse_positive_float),
            max_restarts=env.get("WIDEHOUSE_STREAM_MAX_RESTARTS", 3, _parse_non_negative_int),
        ),
    )


def _load_planner(env: _Env) -> PlannerSettings:
    default = PlannerSettings()
    try:
        return PlannerSettings(
            slot_capacity=env.get(
                "WIDEHOUSE_PLAN_SLOT_CAPACITY", default.slot_capacity, _parse_positive_float
            ),
            message_cost=env.get(
                "WIDEHOUSE_PLAN_MESSAGE_COST", default.message_cost, _parse_non_negative_float
            ),
            target_fill=env.get("WIDEHOUSE_PLAN_TARGET_FILL", default.target_fill, _parse_fraction),
            isolation=env.get("WIDEHOUSE_PLAN_ISOLATION", default.isolation, _parse_fraction),
            partition_capacity=env.get(
                "WIDEHOUSE_PLAN_PARTITION_CAPACITY", default.partition_capacity, _parse_positive_float
            ),
            max_partitions=env.get(
                "WIDEHOUSE_PLAN_MAX_PARTITIONS", default.max_partitions, _parse_positive_int
            ),
            max_group_topics=env.get(
                "WIDEHOUSE_PLAN_MAX_GROUP_TOPICS", default.max_group_topics, _parse_positive_int
            ),
            imbalance=env.get("WIDEHOUSE_PLAN_IMBALANCE", default.imbalance, _parse_non_negative_float),
            smoothing=env.get("WIDEHOUSE_PLAN_SMOOTHING", default.smoothing, _parse_positive_int),
        )
    except ConfigError as exc:
        if "WIDEHOUSE_PLAN_" in str(exc):
            raise
        raise ConfigError(f"WIDEHOUSE_PLAN_* settings: {exc}") from exc


def _parse_dir(value: str) -> Path:
    path = Path(value).expanduser()
    if not path.is_absolute():
        path = Path.cwd() / path
    if path.exists() and not path.is_dir():
        raise ValueError("exists and is not a directory")
    return path


def _check_distinct_ports(local: LocalServicesSettings) -> None:
    seen: dict[int, str] = {}
    for name in (
        "pulsar_broker_port",
        "pulsar_web_port",
        "hbase_zk_port",
        "hbase_master_port",
        "hbase_master_info_port",
        "hbase_regionserver_port",
        "hbase_thrift_port",
        "hbase_thrift_info_port",
    ):
        port = getattr(local, name)
        if port in seen:
            var_a = "WIDEHOUSE_" + seen[port].upper()
            var_b = "WIDEHOUSE_" + name.upper()
            raise ConfigError(f"{var_a} and {var_b} are both {port}; every local service port must differ")
        seen[port] = name


def describe(settings: Settings) -> list[tuple[str, str]]:
    """(name, effective value) pairs for `widehouse config`, secrets masked."""
    s = settings
    return [
        ("state dir", str(s.state_dir)),
        ("vendor dir", str(s.local.vendor_dir)),
        ("schemas dir", str(s.schemas_dir)),
        ("pulsar service url", s.pulsar.service_url),
        ("pulsar admin url", s.pulsar.admin_url),
        ("pulsar auth token", "***" if s.pulsar.auth_token else "(none)"),
        ("clickhouse dsn", s.clickhouse.display_dsn),
        ("clickhouse database", s.clickhouse.database),
        ("delta root", s.delta.root),
        ("hbase thrift", f"{s.hbase.host}:{s.hbase.port}"),
        ("hive metastore", s.hive.metastore_uri or f"embedded ({s.hive.metastore_db_dir})"),
        ("hive warehouse", s.hive.warehouse_dir),
        ("spark master", s.spark.master),
        ("spark jars", ", ".join(s.spark.jars) or "(none)"),
        (
            "slot planner",
            f"capacity {s.planner.slot_capacity:,.0f} B/s, message cost {s.planner.message_cost:,.0f} B, "
            f"target fill {s.planner.target_fill:g}, isolation {s.planner.isolation:g}, "
            f"partition capacity {s.planner.partition_capacity:,.0f} B/s",
        ),
    ]

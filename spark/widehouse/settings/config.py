"""The frozen config objects: one per group of variables, and :class:`Settings` holding them all."""

from __future__ import annotations

import dataclasses
import datetime as dt
import ipaddress
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from widehouse.contracts.identity import checkpoint_path
from widehouse.errors import ConfigError
from widehouse.settings.defaults import local_clickhouse_url
from widehouse.settings.masking import MASK, is_secret_key, mask_url
from widehouse.settings.table import declared_default


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
    auth_token: str | None = field(default=None, repr=False)
    """None: no token (a hand-built config); loaded settings default to the local secured broker's
    superuser token when WIDEHOUSE_PULSAR_AUTH=token."""

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


def is_loopback(host: str | None) -> bool:
    """Whether ``host`` names this machine's loopback interface (``localhost``, 127.0.0.0/8, ::1)."""
    if not host:
        return False
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class ClickHouseSettings:
    dsn: str = field(repr=False)
    database: str = declared_default("clickhouse.database")
    cluster: str | None = declared_default("clickhouse.cluster")
    """The ClickHouse cluster the tables live on (``ON CLUSTER``), or None for one server."""
    compression: str = declared_default("clickhouse.compression")
    """``auto``, ``none``, ``lz4`` or ``zstd``: see :meth:`wire_compression`."""

    def wire_compression(self) -> str | None:
        """The codec inserts and answers travel in (None: uncompressed). ``auto`` leaves a server on
        a loopback host uncompressed (compressing there costs CPU on both sides and saves no
        network; an insert of 3,000 rows of 42 columns spent 4.4 ms of the client's CPU with lz4,
        2.5 ms without) and compresses with lz4 elsewhere."""
        if self.compression != "auto":
            return None if self.compression == "none" else self.compression
        return None if is_loopback(urlsplit(self.dsn).hostname) else "lz4"

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
    bronze_retention_seconds: int = declared_default("delta.bronze_retention_seconds")
    """How far back the bronze tables keep their commits and rewritten files (time travel, slow readers)."""
    bronze_upkeep_seconds: float = declared_default("delta.bronze_upkeep_seconds")
    """How often a stream app compacts and vacuums the bronze tables it writes (0: never)."""
    bronze_compact_files: int = declared_default("delta.bronze_compact_files")
    """Small files that make a bronze partition worth compacting."""

    def path(self, *parts: str) -> str:
        """Join a table path under the root (works for local paths and URIs alike)."""
        return "/".join([self.root.rstrip("/"), *parts])


@dataclass(frozen=True)
class HBaseSettings:
    host: str
    port: int
    timeout_ms: int = declared_default("hbase.timeout_ms")
    salt_buckets: int = declared_default("hbase.salt_buckets")
    refresh_workers: int = declared_default("hbase.refresh_workers")
    table_prefix: str = declared_default("hbase.table_prefix")
    zookeeper: str = field(default="127.0.0.1:2181", kw_only=True)
    """ZooKeeper quorum ``host:port[,host:port]``, for the admin tool that pre-splits day tables."""


@dataclass(frozen=True)
class HiveSettings:
    metastore_uri: str | None = field(repr=False)
    warehouse_dir: str
    metastore_db_dir: str
    """Directory of the embedded Derby metastore (used only when metastore_uri is None)."""

    @property
    def embedded(self) -> bool:
        """Spark's in-process Derby metastore (``WIDEHOUSE_HIVE_METASTORE_URI=embedded``): one process."""
        return self.metastore_uri is None

    def __repr__(self) -> str:
        uri = self.metastore_uri
        return _masked_repr(self, metastore_uri=mask_url(uri) if uri else uri)


@dataclass(frozen=True)
class SparkSettings:
    master: str = declared_default("spark.master")
    shuffle_partitions: int = declared_default("spark.shuffle_partitions")
    ui_enabled: bool = declared_default("spark.ui_enabled")
    driver_memory: str = declared_default("spark.driver_memory")
    jars: tuple[str, ...] = field(kw_only=True)
    extra_conf: tuple[tuple[str, str], ...] = field(default=declared_default("spark.extra_conf"), repr=False)
    local_dir: str | None = field(kw_only=True)
    archive: str | None = field(default=None, kw_only=True)
    """Packed executor environment shipped as ``spark.archives <it>#env`` (non-local masters)."""
    py_files: tuple[str, ...] = field(default=(), kw_only=True)
    """``spark.submit.pyFiles`` on a non-local master (the ``widehouse`` wheel)."""
    python: str | None = field(default=None, kw_only=True)
    """The cluster nodes' Python with ``py_files`` (None: ``PYSPARK_PYTHON``)."""
    shared_paths: bool = field(default=False, kw_only=True)
    """Local paths are on a file system every node mounts at the same place."""
    class_archive_dir: str | None = field(default=None, kw_only=True)
    """Where the driver JVM's class-data-sharing archives are (:mod:`widehouse.spark.class_archive`);
    None: never use one."""
    launch_plans_dir: str | None = field(default=None, kw_only=True)
    """Where the driver's launch plans are kept (:mod:`widehouse.spark.driver_launch`); None: every
    driver starts through spark-submit."""
    lean_home_dir: str | None = field(default=None, kw_only=True)
    """Where the driver's lean Spark homes are made (:mod:`widehouse.spark.lean_home`); None: the driver
    runs from Spark's home as it is."""
    forks_dir: str | None = field(default=None, kw_only=True)
    """Where the fork launchers of a local driver's Python processes are (:mod:`widehouse.spark.fork_server`);
    None: Spark starts each of them as a new interpreter."""
    driver_jit: str = field(default=declared_default("spark.driver_jit"), kw_only=True)
    """The driver JVM's JIT profile (:mod:`widehouse.spark.jit`; ``auto`` depends on the job)."""

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
    pulsar_broker_port: int = declared_default("local.pulsar_broker_port")
    pulsar_web_port: int = declared_default("local.pulsar_web_port")
    pulsar_heap: str = declared_default("local.pulsar_heap")
    pulsar_direct_memory: str = declared_default("local.pulsar_direct_memory")
    pulsar_jit: str = declared_default("local.pulsar_jit")
    """How the broker's JVM compiles (a profile of :mod:`widehouse.jvm`)."""
    pulsar_auth: str = declared_default("local.pulsar_auth")
    """``none`` or ``token`` (authentication and authorization on, keys under ``<state>/secrets``)."""
    hbase_zk_port: int = declared_default("local.hbase_zk_port")
    hbase_master_port: int = declared_default("local.hbase_master_port")
    hbase_master_info_port: int = declared_default("local.hbase_master_info_port")
    hbase_regionserver_port: int = declared_default("local.hbase_regionserver_port")
    hbase_heap: str = declared_default("local.hbase_heap")
    hbase_thrift_port: int = declared_default("local.hbase_thrift_port")
    hbase_thrift_info_port: int = declared_default("local.hbase_thrift_info_port")
    hbase_thrift_heap: str = declared_default("local.hbase_thrift_heap")
    start_timeout: float = declared_default("local.start_timeout")
    clickhouse_port: int = declared_default("local.clickhouse_port")
    clickhouse_user: str = declared_default("local.clickhouse_user")
    clickhouse_password: str | None = field(default=None, repr=False)
    """None until ``widehouse services up`` generated one (or WIDEHOUSE_CLICKHOUSE_PASSWORD sets it)."""
    clickhouse_handles: int = declared_default("local.clickhouse_handles")
    hive_metastore_port: int = declared_default("local.hive_metastore_port")
    hive_metastore_heap: str = declared_default("local.hive_metastore_heap")
    hive_warehouse_dir: str | None = field(default=None, kw_only=True)
    """The metastore service's warehouse: WIDEHOUSE_HIVE_WAREHOUSE, what every Spark session uses
    (always set by loading; None, for configs built by hand, means ``<state>/hive/warehouse``)."""

    @property
    def hive_metastore_uri(self) -> str:
        """Thrift URI of the local ``metastore`` service (the default WIDEHOUSE_HIVE_METASTORE_URI)."""
        return f"thrift://127.0.0.1:{self.hive_metastore_port}"

    spark_master_port: int = declared_default("local.spark_master_port")
    spark_master_ui_port: int = declared_default("local.spark_master_ui_port")
    spark_workers: int = declared_default("local.spark_workers")
    spark_worker_cores: int = declared_default("local.spark_worker_cores")
    spark_worker_memory: str = declared_default("local.spark_worker_memory")

    @property
    def spark_master_url(self) -> str:
        """``spark://`` URL of the local standalone cluster (``widehouse services up spark``)."""
        return f"spark://127.0.0.1:{self.spark_master_port}"

    @property
    def clickhouse_url(self) -> str:
        """URL of the local ClickHouse server, with its credentials (mask it before showing it)."""
        return local_clickhouse_url(self.clickhouse_user, self.clickhouse_password, self.clickhouse_port)


@dataclass(frozen=True)
class PlannerSettings:
    """Knobs of the slot planner (:mod:`widehouse.planner` documents the model).

    Loads are bytes/s equivalents: ``byte_rate + msg_rate * message_cost``. Construction validates
    every field and raises :class:`ConfigError` naming it.
    """

    slot_capacity: float = declared_default("planner.slot_capacity")
    """Load one core carries (bytes/s equivalent); to be calibrated by the benchmarks."""
    message_cost: float = declared_default("planner.message_cost")
    """Bytes charged per message on top of its size."""
    target_fill: float = declared_default("planner.target_fill")
    """Packed groups are filled to ``target_fill * slot_capacity``; isolated topics get cores to match."""
    isolation: float = declared_default("planner.isolation")
    """Topics heavier than ``isolation * slot_capacity`` get a group of their own."""
    partition_capacity: float = declared_default("planner.partition_capacity")
    """Load one Pulsar partition is planned to carry."""
    max_partitions: int = declared_default("planner.max_partitions")
    """Most partitions planned for a topic (a topic that already has more keeps them)."""
    max_group_topics: int = declared_default("planner.max_group_topics")
    """Most topics in one packed group."""
    imbalance: float = declared_default("planner.imbalance")
    """Drift tolerated before a replan moves topics (over the target load, over the fewest groups)."""
    smoothing: int = declared_default("planner.smoothing")
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

    app: str = declared_default("stream.app")
    tenant_suffix: str | None = declared_default("stream.tenant_suffix")
    """Topics live in ``<tenant>-<suffix>`` instead of the catalog's tenants (see Catalog.relocated)."""
    checkpoint_root: str = field(kw_only=True)
    trigger_seconds: float = declared_default("stream.trigger_seconds")
    max_messages: int = declared_default("stream.max_messages")
    cut_slack: float = declared_default("stream.cut_slack")
    sinks: tuple[str, ...] = declared_default("stream.sinks")
    stop_grace_seconds: float = declared_default("stream.stop_grace_seconds")
    max_restarts: int = declared_default("stream.max_restarts")
    restart_backoff_s: float = declared_default("stream.restart_backoff_s")
    restart_backoff_max_s: float = declared_default("stream.restart_backoff_max_s")
    dead_letter: bool = declared_default("stream.dead_letter")
    """Forward quarantined messages to ``<topic>-DLQ`` (:mod:`widehouse.stream.deadletter`)."""
    control_topic: str | None = declared_default("stream.control_topic")
    """Where groups publish committed watermarks (:mod:`widehouse.stream.control`); None: nowhere."""

    def __post_init__(self) -> None:
        if self.restart_backoff_s > self.restart_backoff_max_s:
            raise ConfigError(
                f"WIDEHOUSE_STREAM_RESTART_BACKOFF_SECONDS={self.restart_backoff_s!r} must be <= "
                f"WIDEHOUSE_STREAM_RESTART_BACKOFF_MAX_SECONDS={self.restart_backoff_max_s!r} (its cap)"
            )

    def checkpoint(self, group: str) -> str:
        """Checkpoint location of one slot group."""
        return checkpoint_path(self.checkpoint_root, self.app, group)


@dataclass(frozen=True)
class AirflowSettings:
    """The local Airflow `widehouse airflow up` runs (API server, scheduler, DAG processor, triggerer)."""

    home: Path
    dags_dir: Path
    connections_file: Path | None = field(kw_only=True)
    port: int = declared_default("airflow.port")
    worker_log_port: int = declared_default("airflow.worker_log_port")
    triggerer_log_port: int = declared_default("airflow.triggerer_log_port")
    user: str = declared_default("airflow.user")
    password: str | None = field(default=None, repr=False)
    """None until ``widehouse airflow up`` generated one (or WIDEHOUSE_AIRFLOW_PASSWORD sets it)."""
    start: dt.datetime = field(default=declared_default("airflow.start"))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@dataclass(frozen=True)
class SupervisorSettings:
    """How the streams supervisor runs slot groups and when it restarts them."""

    mode: str = declared_default("supervisor.mode")
    stale_seconds: float = declared_default("supervisor.stale_seconds")
    startup_seconds: float = declared_default("supervisor.startup_seconds")
    backoff_seconds: float = declared_default("supervisor.backoff_seconds")
    backoff_max_seconds: float = declared_default("supervisor.backoff_max_seconds")
    max_failures: int = declared_default("supervisor.max_failures")
    spark_submit: str = declared_default("supervisor.spark_submit")


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

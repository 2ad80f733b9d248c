"""The variable table, part one: the state dir, the stores and engines, Spark, the local services."""

from __future__ import annotations

from typing import Any

from widehouse import paths, private
from widehouse.settings.declarations import Derived, Variable
from widehouse.settings.defaults import (
    CLICKHOUSE_DSN_DEFAULT,
    STATE,
    default_delta_jars,
    generated_secret,
    under_state,
)
from widehouse.settings.masking import mask_spark_conf
from widehouse.settings.parsers import (
    parse_bool,
    parse_clickhouse_cluster,
    parse_clickhouse_compression,
    parse_clickhouse_dsn,
    parse_compact_files,
    parse_dir,
    parse_driver_jit,
    parse_hbase_table_prefix,
    parse_heap,
    parse_host,
    parse_identifier,
    parse_jars,
    parse_java_home,
    parse_jvm_jit,
    parse_local_dir_or_off,
    parse_location,
    parse_metastore_uri,
    parse_non_negative_float,
    parse_optional_command,
    parse_optional_location,
    parse_password,
    parse_port,
    parse_positive_float,
    parse_positive_int,
    parse_pulsar_auth,
    parse_salt_buckets,
    parse_spark_conf,
    parse_spark_master,
    parse_token,
    parse_user,
    parse_zookeeper,
    url_parser,
)

SERVICE_VARIABLES: tuple[Variable[Any], ...] = (
    Variable(
        STATE,
        Derived("<checkout>/.state", (), lambda _: paths.default_state_dir()),
        parse_dir,
        "state_dir",
        "Local state: service data, logs, pid files, chDB data, Delta tables, Hive metastore, checkpoints.",
    ),
    Variable(
        "WIDEHOUSE_VENDOR_DIR",
        Derived("<checkout>/.vendor", (), lambda _: paths.default_vendor_dir()),
        parse_dir,
        "local.vendor_dir",
        "JVM parts resolved by `make setup` (Pulsar distribution, HBase jars, Delta jars, Maven repository).",
    ),
    Variable(
        "WIDEHOUSE_SCHEMAS_DIR",
        Derived("<checkout>/schemas", (), lambda _: paths.default_schemas_dir()),
        parse_dir,
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
        url_parser("pulsar", "pulsar+ssl", multi_host=True),
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
        url_parser("http", "https"),
        "pulsar.admin_url",
        "Pulsar admin REST URL (http:// or https://).",
    ),
    Variable(
        "WIDEHOUSE_PULSAR_AUTH_TOKEN",
        Derived(
            "(none); with WIDEHOUSE_PULSAR_AUTH=token the local broker's superuser token "
            f"<state>/{private.SECRETS_DIR}/{private.PULSAR_ADMIN_TOKEN}",
            (STATE, "WIDEHOUSE_PULSAR_AUTH"),
            lambda r: (
                private.read_secret(r[STATE], private.PULSAR_ADMIN_TOKEN)
                if r["WIDEHOUSE_PULSAR_AUTH"] == "token"
                else None
            ),
        ),
        parse_token,
        "pulsar.auth_token",
        "JWT for Pulsar token authentication (the client, the admin REST calls, source, sink, generator).",
        secret=True,
    ),
    Variable(
        "WIDEHOUSE_CLICKHOUSE_DSN",
        CLICKHOUSE_DSN_DEFAULT,
        parse_clickhouse_dsn,
        "clickhouse.dsn",
        "ClickHouse: `http(s)://user:pass@host:8123/db` for a server (by default the local `clickhouse` "
        "service), or `chdb:///abs/path` for an in-process engine owned by one process.",
        secret=True,
    ),
    Variable(
        "WIDEHOUSE_CLICKHOUSE_DATABASE",
        "wh",
        parse_identifier,
        "clickhouse.database",
        "ClickHouse database for Widehouse tables (a database in the DSN path wins).",
    ),
    Variable(
        "WIDEHOUSE_CLICKHOUSE_CLUSTER",
        None,
        parse_clickhouse_cluster,
        "clickhouse.cluster",
        "ClickHouse cluster (a `remote_servers` name) to create the tables on: replicated engines, "
        "wide tables sharded by key behind Distributed tables, idempotency records written with a "
        "quorum and read with sequential consistency. Unset (or `none`): one server.",
    ),
    Variable(
        "WIDEHOUSE_CLICKHOUSE_COMPRESSION",
        "auto",
        parse_clickhouse_compression,
        "clickhouse.compression",
        "ClickHouse: how inserts and answers travel: `lz4` or `zstd` compressed, or `none`. `auto`: "
        "none to a server on this machine (a loopback host: compressing costs both sides CPU and "
        "saves no network), lz4 to any other.",
    ),
    Variable(
        "WIDEHOUSE_DELTA_ROOT",
        under_state("delta", "delta"),
        parse_location,
        "delta.root",
        "Root path or URI of the Delta tables (bronze/, silver/ below it).",
    ),
    Variable(
        "WIDEHOUSE_DELTA_BRONZE_RETENTION_SECONDS",
        900,
        parse_positive_int,
        "delta.bronze_retention_seconds",
        "How long the stream's bronze Delta tables keep commits (`delta.logRetentionDuration`) and "
        "files that compaction rewrote (`delta.deletedFileRetentionDuration`): time travel on a bronze "
        "table reaches this far back, and a reader may take this long. Data files no commit names (an "
        "append cut short by a crash) are deleted once older than this rounded up to whole hours, at "
        "least one. Every batch commits to every bronze table, and each append lists the whole log: "
        "keep it short (see the bronze upkeep in the README).",
    ),
    Variable(
        "WIDEHOUSE_DELTA_BRONZE_UPKEEP_SECONDS",
        60.0,
        parse_non_negative_float,
        "delta.bronze_upkeep_seconds",
        "How often a stream app compacts the partitions of its bronze tables that hold many small "
        "files (one per batch) and vacuums what compaction rewrote; 0 turns the upkeep off. A round "
        "with nothing to compact only reads the tables' state; between rounds a partition gains a "
        "file per batch (60 on a 1 s trigger).",
    ),
    Variable(
        "WIDEHOUSE_DELTA_BRONZE_COMPACT_FILES",
        16,
        parse_compact_files,
        "delta.bronze_compact_files",
        "The upkeep compacts a bronze partition once it holds this many small files: fewer keeps "
        "appends and readers quicker, more rewrites a partition's data less often.",
    ),
    Variable("WIDEHOUSE_HBASE_HOST", "127.0.0.1", parse_host, "hbase.host", "HBase Thrift (v1) server host."),
    Variable(
        "WIDEHOUSE_HBASE_PORT",
        Derived(
            "<hbase thrift port>",
            ("WIDEHOUSE_HBASE_THRIFT_PORT",),
            lambda r: r["WIDEHOUSE_HBASE_THRIFT_PORT"],
        ),
        parse_port,
        "hbase.port",
        "HBase Thrift (v1) server port.",
    ),
    Variable(
        "WIDEHOUSE_HBASE_TIMEOUT_MS",
        60000,
        parse_positive_int,
        "hbase.timeout_ms",
        "HBase Thrift socket timeout in milliseconds.",
    ),
    Variable(
        "WIDEHOUSE_HBASE_SALT_BUCKETS",
        16,
        parse_salt_buckets,
        "hbase.salt_buckets",
        "Salt buckets of the HBase day tables (row key prefix, pre-split regions, parallel extract scans).",
    ),
    Variable(
        "WIDEHOUSE_HBASE_REFRESH_WORKERS",
        2,
        parse_positive_int,
        "hbase.refresh_workers",
        "Threads that write the stream family of an HBase day table (finalize's refresh, the daily merge): "
        "each takes salt buckets one at a time, with its own ClickHouse query and Thrift connection "
        "(2 fits a 2-core box that also runs ClickHouse and HBase; raise it with more cores or servers).",
    ),
    Variable(
        "WIDEHOUSE_HBASE_TABLE_PREFIX",
        "wh_",
        parse_hbase_table_prefix,
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
        parse_zookeeper,
        "hbase.zookeeper",
        "HBase ZooKeeper quorum (host:port[,host:port]); only creating a pre-split day table uses it.",
    ),
    Variable(
        "WIDEHOUSE_HIVE_METASTORE_URI",
        Derived(
            "thrift://127.0.0.1:<hive metastore port>",
            ("WIDEHOUSE_HIVE_METASTORE_PORT",),
            lambda r: f"thrift://127.0.0.1:{r['WIDEHOUSE_HIVE_METASTORE_PORT']}",
        ),
        parse_metastore_uri,
        "hive.metastore_uri",
        "thrift:// URI of the Hive metastore every Spark process shares (by default the local `metastore` "
        "service); `embedded` opts into Spark's in-process Derby metastore under the state dir, which "
        "admits one Spark process at a time.",
    ),
    Variable(
        "WIDEHOUSE_HIVE_WAREHOUSE",
        under_state("hive/warehouse", "hive", "warehouse"),
        parse_location,
        "hive.warehouse_dir",
        "Hive / Spark SQL warehouse dir.",
    ),
    Variable(
        "WIDEHOUSE_SPARK_MASTER",
        "local[*]",
        parse_spark_master,
        "spark.master",
        "Spark master URL (local[N], spark://, yarn, k8s://).",
    ),
    Variable(
        "WIDEHOUSE_SPARK_SHUFFLE_PARTITIONS",
        4,
        parse_positive_int,
        "spark.shuffle_partitions",
        "spark.sql.shuffle.partitions.",
    ),
    Variable("WIDEHOUSE_SPARK_UI", False, parse_bool, "spark.ui_enabled", "Start the Spark UI (true/false)."),
    Variable(
        "WIDEHOUSE_SPARK_DRIVER_MEMORY",
        "2g",
        parse_heap,
        "spark.driver_memory",
        "spark.driver.memory (heap of the driver JVM).",
    ),
    Variable(
        "WIDEHOUSE_SPARK_CLASS_ARCHIVE_DIR",
        Derived(
            "<vendor>/spark-cds",
            ("WIDEHOUSE_VENDOR_DIR",),
            lambda r: str(r["WIDEHOUSE_VENDOR_DIR"] / "spark-cds"),
        ),
        parse_local_dir_or_off,
        "spark.class_archive_dir",
        "Where `widehouse spark archive` (run by `make setup`) keeps the driver JVM's class-data-sharing "
        "archive of Spark's classes, one per JDK and Spark build (beside the other resolved JVM parts, "
        "shared by every state dir); a driver starts from it when it is there (~2 s less start-up). "
        "`off` never uses one.",
    ),
    Variable(
        "WIDEHOUSE_SPARK_LAUNCH_PLANS_DIR",
        Derived(
            "<vendor>/spark-launch",
            ("WIDEHOUSE_VENDOR_DIR",),
            lambda r: str(r["WIDEHOUSE_VENDOR_DIR"] / "spark-launch"),
        ),
        parse_local_dir_or_off,
        "spark.launch_plans_dir",
        "Where the driver's launch plans are kept (widehouse.spark.driver_launch): the java command "
        "spark-submit's launcher JVM prints, per JDK, Spark and driver options, so a driver starts "
        "without that JVM (~0.3 s and ~0.35 core-s less per start). Created 0700; a directory or plan "
        "another user could write is never used. `off` starts every driver through spark-submit.",
    ),
    Variable(
        "WIDEHOUSE_SPARK_LEAN_HOME_DIR",
        Derived(
            "<vendor>/spark-lean",
            ("WIDEHOUSE_VENDOR_DIR",),
            lambda r: str(r["WIDEHOUSE_VENDOR_DIR"] / "spark-lean"),
        ),
        parse_local_dir_or_off,
        "spark.lean_home_dir",
        "Where the driver's lean Spark home is made (widehouse.spark.lean_home): links to the installed "
        "Spark without its ML jar, which registers ML functions in every session (~0.3-0.5 s of each "
        "session's start). Created 0700; one another user could change is never used. A SPARK_HOME of "
        "your own is used as it is. `off` runs the driver from Spark's home as it is (ML functions on "
        "local[*]).",
    ),
    Variable(
        "WIDEHOUSE_SPARK_FORKS_DIR",
        Derived(
            "<vendor>/spark-forks",
            ("WIDEHOUSE_VENDOR_DIR",),
            lambda r: str(r["WIDEHOUSE_VENDOR_DIR"] / "spark-forks"),
        ),
        parse_local_dir_or_off,
        "spark.forks_dir",
        "Where a local driver keeps the launcher of its fork server (widehouse.spark.fork_server): Spark's "
        "Python processes (the data source's planners, each query's source runner, the task workers' "
        "daemon) are forked from an interpreter that imported pyspark while the JVM started, instead of "
        "each starting cold (~0.3-0.6 core-s each). Created 0700; a launcher another user could change is "
        "never used. `off` starts each as a new interpreter.",
    ),
    Variable(
        "WIDEHOUSE_SPARK_DRIVER_JIT",
        "auto",
        parse_driver_jit,
        "spark.driver_jit",
        "How the driver JVM compiles (widehouse.spark.jit): `c1` C1 only (the quickest start: ~1.5 s less "
        "on 2 cores, and the JVM half as busy in a stream's first minutes), `late-c2` C2 only for code ten "
        "times hotter than the JVM's thresholds, `tiered` the JVM's own; `auto` is `c1` for the stream app "
        "(its JVM runs the micro-batches' control plane) and `tiered` for every other job. Ignored when "
        "WIDEHOUSE_SPARK_CONF's driver Java options choose.",
    ),
    Variable(
        "WIDEHOUSE_SPARK_JARS",
        Derived(
            "(Delta jars in the vendor dir)",
            ("WIDEHOUSE_VENDOR_DIR",),
            lambda r: default_delta_jars(r["WIDEHOUSE_VENDOR_DIR"]),
        ),
        parse_jars,
        "spark.jars",
        "Comma-separated jars for spark.jars; set empty on a cluster that ships Delta itself.",
        blank_is_value=True,
    ),
    Variable(
        "WIDEHOUSE_SPARK_CONF",
        (),
        parse_spark_conf,
        "spark.extra_conf",
        "Extra Spark settings, `key=value` pairs separated "
        "by newlines or `;`; they win over every other Spark setting.",
        mask=mask_spark_conf,
    ),
    Variable(
        "WIDEHOUSE_SPARK_ARCHIVE",
        None,
        parse_optional_location,
        "spark.archive",
        "Packed executor environment (`widehouse spark package`, a .tar.gz) shipped with every job on "
        "a non-local master as spark.archives `<it>#env`, with the executors' Python "
        "`./env/bin/python`; a path the driver reads or a URI the cluster reads.",
        doc="(none)",
    ),
    Variable(
        "WIDEHOUSE_SPARK_PY_FILES",
        (),
        parse_jars,
        "spark.py_files",
        "Comma-separated files for spark.submit.pyFiles on a non-local master (the `widehouse` wheel "
        "`widehouse spark package` builds), over a cluster Python that has the pinned dependencies.",
    ),
    Variable(
        "WIDEHOUSE_SPARK_PYTHON",
        None,
        parse_optional_command,
        "spark.python",
        "With WIDEHOUSE_SPARK_PY_FILES: the Python of the cluster's nodes (the same path on the "
        "driver and every node); empty means PYSPARK_PYTHON or python3.",
        doc="(PYSPARK_PYTHON)",
    ),
    Variable(
        "WIDEHOUSE_SHARED_PATHS",
        False,
        parse_bool,
        "spark.shared_paths",
        "On a non-local master, whether local paths (the checkpoint root, the Delta root, the "
        "warehouse dir) are on a file system every node mounts at the same place; if false they are "
        "refused.",
    ),
    Variable(
        "WIDEHOUSE_JAVA_HOME",
        Derived("(JAVA_HOME, or java on PATH)", ("JAVA_HOME",), lambda r: r["JAVA_HOME"]),
        parse_java_home,
        "local.java_home",
        "JDK 17+ used for the local services.",
    ),
    Variable(
        "WIDEHOUSE_PULSAR_BROKER_PORT",
        6650,
        parse_port,
        "local.pulsar_broker_port",
        "Local Pulsar standalone: binary protocol port.",
    ),
    Variable(
        "WIDEHOUSE_PULSAR_WEB_PORT",
        8090,
        parse_port,
        "local.pulsar_web_port",
        "Local Pulsar standalone: admin REST / web port (not 8080, which Airflow's API server takes).",
    ),
    Variable(
        "WIDEHOUSE_PULSAR_AUTH",
        "none",
        parse_pulsar_auth,
        "local.pulsar_auth",
        "Local Pulsar standalone: `token` turns on token authentication and authorization (a secret key "
        "and a superuser token, role `widehouse-admin`, generated under <state>/secrets); `none`: open.",
    ),
    Variable(
        "WIDEHOUSE_PULSAR_HEAP",
        "512m",
        parse_heap,
        "local.pulsar_heap",
        "Local Pulsar standalone: JVM heap (-Xmx).",
    ),
    Variable(
        "WIDEHOUSE_PULSAR_DIRECT_MEMORY",
        "512m",
        parse_heap,
        "local.pulsar_direct_memory",
        "Local Pulsar standalone: JVM direct memory.",
    ),
    Variable(
        "WIDEHOUSE_PULSAR_JIT",
        "c1",
        parse_jvm_jit,
        "local.pulsar_jit",
        "Local Pulsar standalone: how the broker's JVM compiles (widehouse.jvm). `c1` C1 only: on 2 cores "
        "a tiered broker's C2 compiler was still 40 % of its CPU after a quarter of an hour of benchmarks, "
        "and a fresh `c1` broker used less than half the CPU of a tiered one over `python -m bench drain`; "
        "`late-c2` C2 only for code ten times hotter than the JVM's thresholds; `tiered` the JVM's own "
        "(the cheapest once a broker has run hot for long).",
    ),
    Variable(
        "WIDEHOUSE_HBASE_ZK_PORT",
        2181,
        parse_port,
        "local.hbase_zk_port",
        "Local HBase: embedded ZooKeeper client port.",
    ),
    Variable(
        "WIDEHOUSE_HBASE_MASTER_PORT",
        16000,
        parse_port,
        "local.hbase_master_port",
        "Local HBase: master RPC port.",
    ),
    Variable(
        "WIDEHOUSE_HBASE_MASTER_INFO_PORT",
        16010,
        parse_port,
        "local.hbase_master_info_port",
        "Local HBase: master web/JMX port (health).",
    ),
    Variable(
        "WIDEHOUSE_HBASE_REGIONSERVER_PORT",
        16020,
        parse_port,
        "local.hbase_regionserver_port",
        "Local HBase: region server RPC port.",
    ),
    Variable(
        "WIDEHOUSE_HBASE_HEAP",
        "768m",
        parse_heap,
        "local.hbase_heap",
        "Local HBase (master + region server + ZooKeeper): heap.",
    ),
    Variable(
        "WIDEHOUSE_HBASE_THRIFT_PORT",
        9090,
        parse_port,
        "local.hbase_thrift_port",
        "Local HBase Thrift (v1) server port.",
    ),
    Variable(
        "WIDEHOUSE_HBASE_THRIFT_INFO_PORT",
        9095,
        parse_port,
        "local.hbase_thrift_info_port",
        "Local HBase Thrift server web port.",
    ),
    Variable(
        "WIDEHOUSE_HBASE_THRIFT_HEAP",
        "256m",
        parse_heap,
        "local.hbase_thrift_heap",
        "Local HBase Thrift server: JVM heap.",
    ),
    Variable(
        "WIDEHOUSE_CLICKHOUSE_PORT",
        8123,
        parse_port,
        "local.clickhouse_port",
        "Local ClickHouse server: HTTP port.",
    ),
    Variable(
        "WIDEHOUSE_CLICKHOUSE_USER",
        "widehouse",
        parse_user,
        "local.clickhouse_user",
        "Local ClickHouse server: the user Widehouse connects as.",
    ),
    Variable(
        "WIDEHOUSE_CLICKHOUSE_PASSWORD",
        generated_secret(private.CLICKHOUSE_PASSWORD, "widehouse services up"),
        parse_password,
        "local.clickhouse_password",
        "Local ClickHouse server: that user's password; `widehouse config --show-secrets` shows it.",
        secret=True,
    ),
    Variable(
        "WIDEHOUSE_CLICKHOUSE_HANDLES",
        4,
        parse_positive_int,
        "local.clickhouse_handles",
        "Local ClickHouse server: handles (concurrent sessions) it serves.",
    ),
    Variable(
        "WIDEHOUSE_HIVE_METASTORE_PORT",
        9083,
        parse_port,
        "local.hive_metastore_port",
        "Local Hive metastore service: Thrift port.",
    ),
    Variable(
        "WIDEHOUSE_HIVE_METASTORE_HEAP",
        "256m",
        parse_heap,
        "local.hive_metastore_heap",
        "Local Hive metastore service: JVM heap (-Xmx).",
    ),
    Variable(
        "WIDEHOUSE_SPARK_MASTER_PORT",
        17077,
        parse_port,
        "local.spark_master_port",
        "Local Spark standalone cluster (`widehouse services up spark`): the master's port "
        "(WIDEHOUSE_SPARK_MASTER=spark://127.0.0.1:<it> uses it).",
    ),
    Variable(
        "WIDEHOUSE_SPARK_MASTER_UI_PORT",
        17080,
        parse_port,
        "local.spark_master_ui_port",
        "Local Spark standalone cluster: the master's web UI and JSON status port (health).",
    ),
    Variable(
        "WIDEHOUSE_SPARK_WORKERS",
        1,
        parse_positive_int,
        "local.spark_workers",
        "Local Spark standalone cluster: number of workers (each in its own work dir).",
    ),
    Variable(
        "WIDEHOUSE_SPARK_WORKER_CORES",
        2,
        parse_positive_int,
        "local.spark_worker_cores",
        "Local Spark standalone cluster: cores each worker offers.",
    ),
    Variable(
        "WIDEHOUSE_SPARK_WORKER_MEMORY",
        "2g",
        parse_heap,
        "local.spark_worker_memory",
        "Local Spark standalone cluster: memory each worker offers to executors.",
    ),
    Variable(
        "WIDEHOUSE_SERVICE_START_TIMEOUT",
        180.0,
        parse_positive_float,
        "local.start_timeout",
        "Seconds a local service may take to become healthy.",
    ),
)

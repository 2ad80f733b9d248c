"""The variable table, part two: the slot planner, the streams, Airflow, the streams supervisor."""

from __future__ import annotations

import datetime as dt
from typing import Any

from widehouse import paths, private
from widehouse.contracts import values
from widehouse.settings.declarations import Derived, Variable
from widehouse.settings.defaults import CONTROL_TOPIC_DEFAULT, generated_secret, under_state
from widehouse.settings.parsers import (
    STREAM_SINKS,
    parse_app_id,
    parse_bool,
    parse_command,
    parse_control_topic,
    parse_cut_slack,
    parse_dir,
    parse_file,
    parse_location,
    parse_non_negative_float,
    parse_non_negative_int,
    parse_password,
    parse_port,
    parse_positive_float,
    parse_positive_int,
    parse_sinks,
    parse_start_hour,
    parse_supervisor_mode,
    parse_tenant_suffix,
    parse_user,
)

JOB_VARIABLES: tuple[Variable[Any], ...] = (
    Variable(
        "WIDEHOUSE_PLAN_SLOT_CAPACITY",
        46_000_000.0,
        values.parse_rate,
        "planner.slot_capacity",
        "Slot planner: load one core carries, in bytes/s (a message counts its bytes plus the message cost).",
    ),
    Variable(
        "WIDEHOUSE_PLAN_MESSAGE_COST",
        500.0,
        values.parse_bytes,
        "planner.message_cost",
        "Slot planner: bytes charged per message on top of its size, so tiny high-rate topics count.",
    ),
    Variable(
        "WIDEHOUSE_PLAN_TARGET_FILL",
        0.8,
        values.parse_fraction,
        "planner.target_fill",
        "Slot planner: share of a core's capacity that packed groups (and isolated topics) are planned to.",
    ),
    Variable(
        "WIDEHOUSE_PLAN_ISOLATION",
        0.5,
        values.parse_fraction,
        "planner.isolation",
        "Slot planner: topics heavier than this share of a core get a group of their own (<= target fill).",
    ),
    Variable(
        "WIDEHOUSE_PLAN_PARTITION_CAPACITY",
        5_000_000.0,
        values.parse_rate,
        "planner.partition_capacity",
        "Slot planner: load one Pulsar partition is planned to carry, in bytes/s.",
    ),
    Variable(
        "WIDEHOUSE_PLAN_MAX_PARTITIONS",
        64,
        parse_positive_int,
        "planner.max_partitions",
        "Slot planner: most partitions it plans for a topic.",
    ),
    Variable(
        "WIDEHOUSE_PLAN_MAX_GROUP_TOPICS",
        1000,
        parse_positive_int,
        "planner.max_group_topics",
        "Slot planner: most topics in one packed group.",
    ),
    Variable(
        "WIDEHOUSE_PLAN_IMBALANCE",
        0.25,
        parse_non_negative_float,
        "planner.imbalance",
        "Slot planner: drift tolerated (over the target load, over the fewest groups) before a replan "
        "moves topics.",
    ),
    Variable(
        "WIDEHOUSE_PLAN_SMOOTHING",
        5,
        parse_positive_int,
        "planner.smoothing",
        "Slot planner: live traffic is the median of the last N stats observations kept in the state dir.",
    ),
    Variable(
        "WIDEHOUSE_TENANT_SUFFIX",
        None,
        parse_tenant_suffix,
        "stream.tenant_suffix",
        "Run against copies of the catalog's tenants named "
        "<tenant>-<suffix> (a staging deployment, an isolated test run); the generator's --tenant-suffix.",
    ),
    Variable(
        "WIDEHOUSE_STREAM_APP",
        "widehouse",
        parse_app_id,
        "stream.app",
        "Streaming: application id; prefixes Pulsar subscriptions, "
        "ClickHouse insert deduplication tokens and Delta txnAppIds (one per deployment).",
    ),
    Variable(
        "WIDEHOUSE_STREAM_CHECKPOINT_ROOT",
        under_state("checkpoints", "checkpoints"),
        parse_location,
        "stream.checkpoint_root",
        "Streaming: checkpoint root; each "
        "slot group checkpoints under <root>/<app>/<group> (a cluster path on a cluster).",
    ),
    Variable(
        "WIDEHOUSE_STREAM_TRIGGER_SECONDS",
        10.0,
        parse_positive_float,
        "stream.trigger_seconds",
        "Streaming: micro-batch trigger interval in seconds (fewer batches per core when longer). For "
        "freshness, one below the batches' own time: at 50,000 events/s on a 2-core box with every "
        "service on it, batches took 1.5-2.5 s and p95 freshness was 4.4 s with `1` (median of 7 runs, "
        "3.8-5.9), 5.8 s with `2` (5 runs, 4.5-6.0).",
    ),
    Variable(
        "WIDEHOUSE_STREAM_MAX_MESSAGES",
        500_000,
        parse_positive_int,
        "stream.max_messages",
        "Streaming: admission budget, messages per micro-batch over all topics of a group.",
    ),
    Variable(
        "WIDEHOUSE_STREAM_CUT_SLACK",
        0.1,
        parse_cut_slack,
        "stream.cut_slack",
        "Streaming: share of a partly read partition's take a batch may fall short by, to end at the "
        "entry boundary a probe of the broker found (0: exact takes; at most 0.5). Fewer probe "
        "rounds while a batch is planned: at 20,000-message batches, 1-2 rounds instead of 3. A drain "
        "(`--available-now`) uses only what costs it no batch more.",
    ),
    Variable(
        "WIDEHOUSE_STREAM_SINKS",
        STREAM_SINKS,
        parse_sinks,
        "stream.sinks",
        "Streaming: sinks to write (clickhouse, delta).",
    ),
    Variable(
        "WIDEHOUSE_STREAM_STOP_GRACE_SECONDS",
        30.0,
        parse_positive_float,
        "stream.stop_grace_seconds",
        "Streaming: on SIGTERM, wait this long for the running "
        "micro-batch to finish before stopping (an unfinished batch is replayed on restart).",
    ),
    Variable(
        "WIDEHOUSE_STREAM_MAX_RESTARTS",
        3,
        parse_non_negative_int,
        "stream.max_restarts",
        "Streaming: consecutive restarts of a failed query from its checkpoint, with no batch "
        "committed in between, before the app gives up (0 = fail at once).",
    ),
    Variable(
        "WIDEHOUSE_STREAM_RESTART_BACKOFF_SECONDS",
        1.0,
        parse_positive_float,
        "stream.restart_backoff_s",
        "Streaming: wait before the first restart of a failed query; doubled for each further "
        "consecutive failure.",
    ),
    Variable(
        "WIDEHOUSE_STREAM_RESTART_BACKOFF_MAX_SECONDS",
        60.0,
        parse_positive_float,
        "stream.restart_backoff_max_s",
        "Streaming: cap of the wait between restarts of a failed query.",
    ),
    Variable(
        "WIDEHOUSE_STREAM_DEAD_LETTER",
        False,
        parse_bool,
        "stream.dead_letter",
        "Streaming: also forward every quarantined message to its topic's dead-letter topic "
        "<topic>-DLQ (same namespace), reason and origin as properties (true/false).",
    ),
    Variable(
        "WIDEHOUSE_STREAM_CONTROL_TOPIC",
        CONTROL_TOPIC_DEFAULT,
        parse_control_topic,
        "stream.control_topic",
        "Streaming: each slot group publishes its committed watermark here (JSON, one message per "
        "batch; what the hourly event trigger watches); empty or `none` publishes nothing.",
        blank_is_value=True,
    ),
    Variable(
        "WIDEHOUSE_AIRFLOW_PORT",
        8080,
        parse_port,
        "airflow.port",
        "Local Airflow: API server (UI, REST API, task execution API) port on loopback.",
    ),
    Variable(
        "WIDEHOUSE_AIRFLOW_WORKER_LOG_PORT",
        8793,
        parse_port,
        "airflow.worker_log_port",
        "Local Airflow: the scheduler's log server port (task logs while they run).",
    ),
    Variable(
        "WIDEHOUSE_AIRFLOW_TRIGGERER_LOG_PORT",
        8794,
        parse_port,
        "airflow.triggerer_log_port",
        "Local Airflow: the triggerer's log server port.",
    ),
    Variable(
        "WIDEHOUSE_AIRFLOW_USER",
        "admin",
        parse_user,
        "airflow.user",
        "Local Airflow: the UI / REST API user (simple auth manager, admin role).",
    ),
    Variable(
        "WIDEHOUSE_AIRFLOW_PASSWORD",
        generated_secret(private.AIRFLOW_PASSWORD, "widehouse airflow up"),
        parse_password,
        "airflow.password",
        "Local Airflow: that user's password; `widehouse config --show-secrets` shows it.",
        secret=True,
    ),
    Variable(
        "WIDEHOUSE_AIRFLOW_DAGS_DIR",
        Derived("<checkout>/dags", (), lambda _: paths.default_dags_dir()),
        parse_dir,
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
        parse_file,
        "airflow.connections_file",
        "Local Airflow: JSON file of Connections (local file-system secrets backend); "
        "empty means the metadata DB only.",
        blank_is_value=True,
    ),
    Variable(
        "WIDEHOUSE_AIRFLOW_START",
        dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        parse_start_hour,
        "airflow.start",
        "Airflow: the first hour the scheduled DAGs cover (UTC; the hourly and daily DAGs catch up "
        "from it when unpaused: set it to when the deployment's streams started).",
        doc="2026-01-01T00:00Z",
    ),
    Variable(
        "WIDEHOUSE_SUPERVISOR_MODE",
        "local",
        parse_supervisor_mode,
        "supervisor.mode",
        "Streams supervisor: `local` runs one detached `widehouse stream` driver per slot group on this "
        "machine, in client mode against WIDEHOUSE_SPARK_MASTER (local or a standalone cluster); "
        "`cluster` submits each group with spark-submit --deploy-mode cluster (YARN, Kubernetes).",
    ),
    Variable(
        "WIDEHOUSE_SUPERVISOR_STALE_SECONDS",
        300.0,
        parse_positive_float,
        "supervisor.stale_seconds",
        "Streams supervisor: an app whose last committed batch is older than this is stuck (restarted).",
    ),
    Variable(
        "WIDEHOUSE_SUPERVISOR_STARTUP_SECONDS",
        300.0,
        parse_positive_float,
        "supervisor.startup_seconds",
        "Streams supervisor: time a (re)started app has to commit its first batch.",
    ),
    Variable(
        "WIDEHOUSE_SUPERVISOR_BACKOFF_SECONDS",
        30.0,
        parse_non_negative_float,
        "supervisor.backoff_seconds",
        "Streams supervisor: wait before the first restart of a failed app; doubles per failure.",
    ),
    Variable(
        "WIDEHOUSE_SUPERVISOR_BACKOFF_MAX_SECONDS",
        1800.0,
        parse_non_negative_float,
        "supervisor.backoff_max_seconds",
        "Streams supervisor: the longest wait between restarts.",
    ),
    Variable(
        "WIDEHOUSE_SUPERVISOR_MAX_FAILURES",
        5,
        parse_positive_int,
        "supervisor.max_failures",
        "Streams supervisor: consecutive failures (no batch committed in between) before an app is "
        "reported and no longer restarted.",
    ),
    Variable(
        "WIDEHOUSE_SPARK_SUBMIT",
        "spark-submit",
        parse_command,
        "supervisor.spark_submit",
        "Streams supervisor, cluster mode: the spark-submit executable.",
    ),
)

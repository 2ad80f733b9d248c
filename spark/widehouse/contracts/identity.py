"""Names that several domains must spell alike: app ids, subscriptions, checkpoint paths, asset
URIs, Airflow Connection ids, the offline Hive database, the reference to an Airflow run.

A streaming app (``WIDEHOUSE_STREAM_APP``) runs one Spark query per slot group; the group's **app
id** (:func:`group_app_id`) names its Pulsar subscriptions (:func:`subscription_name`), its
retirement in the supervisor and the ``pulsar cleanup --retire`` task. Its **checkpoint** sits
under the app's root (:func:`checkpoint_path`). Airflow's assets name a table's published hours
(:func:`final_asset_uri`) and its watermark (:func:`watermark_asset_uri`). A publication made by an
Airflow task records its run as ``<dag id>/<run id>`` (:func:`airflow_run_ref`, the ledger's
``airflow_run``), which the Widehouse view turns back into a link (:func:`parse_airflow_run`).
"""

from __future__ import annotations

import re

from widehouse.errors import ConfigError

SUBSCRIPTION_PREFIX = "widehouse-"
"""The default start of every subscription a Widehouse app owns (source option ``subscriptionPrefix``)."""

PULSAR_CONNECTION = "widehouse_pulsar"
CLICKHOUSE_CONNECTION = "widehouse_clickhouse"
HBASE_CONNECTION = "widehouse_hbase"
"""The Airflow Connection ids the tasks read (:mod:`widehouse.orchestration.connections`) and the
local Airflow is given (:mod:`widehouse.services.airflow`)."""

OFFLINE_DATABASE = "offline"
"""The Hive database of the offline tables (``generate offline --database``, ``daily --offline-database``)."""

_APP_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,99}")  # fullmatch
_DAG_ID_RE = re.compile(r"[A-Za-z0-9_.\-]{1,250}")  # Airflow's dag id: letters, digits, '_', '.', '-'
_RUN_ID_RE = re.compile(r"[^\x00-\x20\x7f]{1,250}")  # any run id Airflow may make or accept, no blanks


def group_app_id(app: str, group: str) -> str:
    """The app id of one slot group of a streaming app: ``<app>-<group>``."""
    return f"{app}-{group}"


def spark_app_name(app: str, group: str) -> str:
    """The name a slot group's stream is submitted under to a cluster manager."""
    return f"widehouse-{group_app_id(app, group)}"


def validate_app_id(app_id: str, option: str = "appId") -> str:
    """``app_id`` if it can name a subscription, else :class:`ConfigError` naming ``option``."""
    if not _APP_RE.fullmatch(app_id):
        raise ConfigError(
            f"option {option}={app_id!r} is invalid: use 1-100 letters, digits, '_', '.', '-' "
            "(it names the app's Pulsar subscriptions)"
        )
    return app_id


def subscription_name(app_id: str, prefix: str = SUBSCRIPTION_PREFIX) -> str:
    """The Pulsar subscription of an app id: ``<prefix><app id>``."""
    return f"{prefix}{validate_app_id(app_id)}"


def app_of(subscription: str, prefix: str = SUBSCRIPTION_PREFIX) -> str | None:
    """The app id of a subscription named by :func:`subscription_name`, else None."""
    if not subscription.startswith(prefix):
        return None
    app = subscription[len(prefix) :]
    return app if _APP_RE.fullmatch(app) else None


def app_checkpoint_root(checkpoint_root: str, app: str) -> str:
    """Where every slot group of an app keeps its Spark checkpoint."""
    return f"{checkpoint_root.rstrip('/')}/{app}"


def checkpoint_path(checkpoint_root: str, app: str, group: str) -> str:
    """The Spark checkpoint location of one slot group of an app."""
    return f"{app_checkpoint_root(checkpoint_root, app)}/{group}"


def final_asset_uri(table: str) -> str:
    """The Airflow asset of a wide table's published (final) periods."""
    return f"widehouse://final/{table}"


def watermark_asset_uri(table: str) -> str:
    """The Airflow asset of a wide table's stream watermark."""
    return f"widehouse://watermark/{table}"


def airflow_run_ref(dag_id: str, run_id: str) -> str:
    """The reference to one Airflow DAG run: ``<dag id>/<run id>`` (a dag id has no ``/``).
    ConfigError naming the bad part otherwise."""
    if not _DAG_ID_RE.fullmatch(dag_id):
        raise ConfigError(f"Airflow dag id {dag_id!r} is invalid: use 1-250 letters, digits, '_', '.', '-'")
    if not _RUN_ID_RE.fullmatch(run_id):
        raise ConfigError(
            f"Airflow run id {run_id!r} is invalid: 1-250 characters, no blanks or control characters"
        )
    return f"{dag_id}/{run_id}"


def parse_airflow_run(text: str) -> tuple[str, str]:
    """(dag id, run id) of an :func:`airflow_run_ref`; ConfigError naming ``text`` otherwise."""
    dag_id, slash, run_id = text.partition("/")
    if not slash:
        raise ConfigError(f"Airflow run {text!r} is invalid: expected <dag id>/<run id>")
    airflow_run_ref(dag_id, run_id)
    return dag_id, run_id


__all__ = [
    "CLICKHOUSE_CONNECTION",
    "HBASE_CONNECTION",
    "OFFLINE_DATABASE",
    "PULSAR_CONNECTION",
    "SUBSCRIPTION_PREFIX",
    "airflow_run_ref",
    "app_checkpoint_root",
    "app_of",
    "checkpoint_path",
    "final_asset_uri",
    "group_app_id",
    "parse_airflow_run",
    "spark_app_name",
    "subscription_name",
    "validate_app_id",
    "watermark_asset_uri",
]

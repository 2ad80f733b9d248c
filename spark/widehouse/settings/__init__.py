"""The one place that reads the environment.

Every ``WIDEHOUSE_*`` variable is declared once in :data:`VARIABLES`: its name, default, parser,
the field of :class:`Settings` it sets (``target``), its meaning, and whether it is a secret. The
README's table, the dataclass defaults and :func:`load_settings` are all derived from that table;
fields no variable sets (``local.state_dir``, ``hive.metastore_db_dir``, ``spark.local_dir``) are
declared in :data:`DERIVED_FIELDS`. Everything else in Widehouse receives the frozen config objects
(or plain values taken from them). Airflow passes its Connections to jobs as these same variables at
run time, so a job runs the same from a shell, a DAG or a test.

Defaults describe the local mode: services on loopback, state under ``<checkout>/.state``,
ClickHouse the local ``clickhouse`` service, the Hive metastore the local ``metastore`` service.
Point any of them at a cluster by setting the variable; nothing in the code assumes local mode.

The local services' passwords have no constant default: ``widehouse services up`` / ``airflow up``
generate them once per state dir (:func:`create_local_secrets`, :mod:`widehouse.private`), and the
defaults read them from there (None until then). Loading never writes, so it stays side-effect free
for ``widehouse config``, DAG parsing and executors; a variable (or an explicit DSN) always wins.

A bad value fails at load time with the variable's name and its value, except for secrets, whose
value is never echoed; URLs are shown with their credentials masked (:func:`mask_url`).

The package, by concern: :mod:`.declarations` (how a variable is declared), :mod:`.masking`
(secrets in URLs and text), :mod:`.parsers` (the values' checks, built on
:mod:`widehouse.contracts.values`), :mod:`.defaults` (defaults derived from other values),
:mod:`.variables_services` and :mod:`.variables_jobs` (the table, joined in :mod:`.table`),
:mod:`.config` (the config objects), :mod:`.loading` (:func:`load_settings`, the local secrets) and
:mod:`.describe` (``widehouse config``). Import the public names from ``widehouse.settings``.
"""

from __future__ import annotations

from widehouse.settings.config import (
    AirflowSettings,
    ClickHouseSettings,
    DeltaSettings,
    HBaseSettings,
    HiveSettings,
    LocalServicesSettings,
    PlannerSettings,
    PulsarSettings,
    Settings,
    SparkSettings,
    StreamSettings,
    SupervisorSettings,
)
from widehouse.settings.declarations import Derived, DerivedField, Variable, format_value
from widehouse.settings.defaults import (
    CLICKHOUSE_DSN_DEFAULT,
    CONTROL_TOPIC_DEFAULT,
    LOCAL_SERVER_CLICKHOUSE_DSN,
    STATE,
    default_delta_jars,
)
from widehouse.settings.describe import describe
from widehouse.settings.loading import LOCAL_SECRETS, CreatedSecret, create_local_secrets, load_settings
from widehouse.settings.masking import MASK, is_secret_key, mask_url
from widehouse.settings.parsers import STREAM_SINKS, SUPERVISOR_MODES
from widehouse.settings.table import DERIVED_FIELDS, VARIABLES

__all__ = [
    "CLICKHOUSE_DSN_DEFAULT",
    "CONTROL_TOPIC_DEFAULT",
    "DERIVED_FIELDS",
    "LOCAL_SECRETS",
    "LOCAL_SERVER_CLICKHOUSE_DSN",
    "MASK",
    "STATE",
    "STREAM_SINKS",
    "SUPERVISOR_MODES",
    "VARIABLES",
    "AirflowSettings",
    "ClickHouseSettings",
    "CreatedSecret",
    "DeltaSettings",
    "Derived",
    "DerivedField",
    "HBaseSettings",
    "HiveSettings",
    "LocalServicesSettings",
    "PlannerSettings",
    "PulsarSettings",
    "Settings",
    "SparkSettings",
    "StreamSettings",
    "SupervisorSettings",
    "Variable",
    "create_local_secrets",
    "default_delta_jars",
    "describe",
    "format_value",
    "is_secret_key",
    "load_settings",
    "mask_url",
]

"""``widehouse config``: the effective settings as (name, value) pairs, secrets masked."""

from __future__ import annotations

from widehouse.settings.config import Settings
from widehouse.settings.masking import MASK, mask_url


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
        (
            "hive metastore",
            url(s.hive.metastore_uri or "") or f"embedded, one process at a time ({s.hive.metastore_db_dir})",
        ),
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

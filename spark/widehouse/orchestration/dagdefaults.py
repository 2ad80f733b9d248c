"""What every Widehouse DAG shares: owner, retries, the tag allow-list, the schemas dir at parse time.

DAG files import this at parse time, so it stays tiny: no Airflow, no Connections, no services.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

OWNER = "widehouse"
TAGS = frozenset({"widehouse", "streams", "batch", "hourly", "daily", "planner", "manual"})
"""Tags a DAG may carry (tests/dags checks every DAG against it)."""


def default_args(retries: int = 2, retry_minutes: float = 2.0) -> dict[str, Any]:
    return {
        "owner": OWNER,
        "retries": retries,
        "retry_delay": dt.timedelta(minutes=retry_minutes),
        "retry_exponential_backoff": True,
    }


def dag_arguments(
    dag_id: str,
    *,
    schedule: object,
    tags: list[str],
    doc_md: str | None,
    catchup: bool = False,
    max_active_runs: int = 1,
    retries: int = 2,
    **extra: Any,
) -> dict[str, Any]:
    """The keyword arguments of ``@dag`` for a Widehouse DAG: its own id, schedule, tags and docs,
    and what every DAG shares (the start date, owner and retries of :func:`default_args`).

    ``extra`` passes on any other ``@dag`` argument (``params``, ``dagrun_timeout``).
    """
    return {
        "dag_id": dag_id,
        "schedule": schedule,
        "start_date": start(),
        "catchup": catchup,
        "max_active_runs": max_active_runs,
        "default_args": default_args(retries=retries),
        "tags": tags,
        "doc_md": doc_md,
        **extra,
    }


def start() -> dt.datetime:
    """The DAGs' ``start_date`` (``WIDEHOUSE_AIRFLOW_START``): the hourly and daily DAGs catch up
    from it, so a new deployment does not finalize every hour since a fixed date."""
    from widehouse.settings import load_settings

    return load_settings().airflow.start


def schemas_dir() -> Path:
    """The catalog the DAGs fan out from (``WIDEHOUSE_SCHEMAS_DIR``); read from files only."""
    from widehouse.settings import load_settings

    return load_settings().schemas_dir

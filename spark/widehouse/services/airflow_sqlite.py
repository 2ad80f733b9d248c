"""SQLite connect arguments of the local Airflow's metadata DB (``[database] sql_alchemy_connect_args``).

Five processes write the one SQLite file (API server, scheduler, DAG processor, triggerer, and a CLI
such as ``airflow backfill create``). sqlite3 waits 5 s for a lock by default, which a loaded box
exceeds: the backfill CLI failed with ``database is locked`` while clearing runs the scheduler was
updating. Waiting longer turns that into a delay. Imported by Airflow by path; keep it import-free.
"""

from __future__ import annotations

from typing import Any

LOCK_WAIT_SECONDS = 60.0
CONNECT_ARGS: dict[str, Any] = {"timeout": LOCK_WAIT_SECONDS}
IMPORT_PATH = "widehouse.services.airflow_sqlite.CONNECT_ARGS"

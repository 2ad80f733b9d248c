"""Offline (Hive) columns of daily tables: the SQL that fills them, rendered safely.

Each offline source of a daily table names a SQL file under ``sql/`` (e.g.
``sql/hive/user_daily_payments.sql``). The file selects ``<key>`` plus the source's columns for one
day. Two things vary per run and neither is pasted in as free text:

- ``${db}`` (the Hive database of the offline tables) is replaced by a validated identifier;
- ``:day`` is a named SQL parameter bound by Spark (``spark.sql(text, args={"day": "2026-05-10"})``).
"""

from __future__ import annotations

import re
from datetime import date

from widehouse.catalog.model import OfflineSource
from widehouse.contracts.periods import PeriodError, parse_day
from widehouse.errors import CatalogError

_DB_RE = re.compile(r"[a-z_][a-z0-9_]{0,62}")  # fullmatch


def render_offline_sql(source: OfflineSource, database: str) -> str:
    """The source's SQL with ``${db}`` replaced; ``:day`` is left for Spark to bind."""
    if not _DB_RE.fullmatch(database):
        raise CatalogError(f"Hive database name {database!r} is not a plain lower-case identifier")
    try:
        text = source.sql_path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CatalogError(f"offline source {source.name}: cannot read {source.sql_path}: {exc}") from exc
    return text.replace("${db}", f"`{database}`").strip().rstrip(";")


def day_parameter(day: date | str) -> dict[str, str]:
    """The named parameters for an offline query: ``{"day": "YYYY-MM-DD"}`` (validated)."""
    text = day.isoformat() if isinstance(day, date) else str(day)
    try:
        parse_day(text)
    except PeriodError as exc:
        raise CatalogError(f"day {text!r} is not a date YYYY-MM-DD") from exc
    return {"day": text}

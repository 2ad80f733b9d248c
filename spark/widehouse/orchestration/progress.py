"""When each slot group last committed a batch, from ClickHouse ``stream_progress`` (no Spark)."""

from __future__ import annotations

import datetime as dt
from typing import Protocol

from widehouse.contracts.tables import PROGRESS


class Queryable(Protocol):
    def rows(self, sql: str, parameters: dict[str, str] | None = None) -> list[tuple[object, ...]]: ...


def last_commits(client: Queryable, app: str) -> dict[str, float]:
    """Group -> epoch seconds of its newest committed batch (groups that never committed are absent)."""
    exists = client.rows(f"EXISTS TABLE `{PROGRESS}`")
    if not exists or not exists[0][0]:
        return {}
    rows = client.rows(
        f"SELECT `group`, max(committed_at) FROM `{PROGRESS}` WHERE app = %(app)s GROUP BY `group`",
        {"app": app},
    )
    found: dict[str, float] = {}
    for group, at in rows:
        if isinstance(at, dt.datetime):
            found[str(group)] = (at if at.tzinfo else at.replace(tzinfo=dt.UTC)).timestamp()
    return found

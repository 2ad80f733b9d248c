"""The repairs of quarantined events, per wide table, for the Widehouse view (:mod:`widehouse.repair`).

Read from ``repairs`` and ``repair_chunks`` only: per table, over the view's long window, the
messages repaired (their chunk done), those a repair left quarantined (newest outcome ``invalid``),
chunks claimed but not done (a repair cut short: the next repair of the table finishes them) and
the newest repair. A deployment that never ran a batch job has no such tables: nothing to show.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING

from widehouse.contracts.periods import as_utc, sql_time
from widehouse.contracts.tables import REPAIR_CHUNKS, REPAIRED, REPAIRS, STILL_INVALID

if TYPE_CHECKING:
    from widehouse.clickhouse import ClickHouse


@dataclass(frozen=True)
class TableRepairs:
    table: str
    repaired: int
    still_invalid: int
    """Messages whose newest repair outcome is ``invalid`` (examined again, still rejected)."""
    unfinished_chunks: int
    newest: dt.datetime | None


def read_repairs(client: ClickHouse, since: dt.datetime) -> list[TableRepairs]:
    """Per table, the repairs recorded since ``since`` (empty when no repair table exists)."""
    exists = client.scalar(
        "SELECT count() FROM system.tables WHERE database = currentDatabase() AND name = {n:String}",
        {"n": REPAIRS},
    )
    if not exists:
        return []
    newest = (  # one row per message: its newest outcome and chunk
        "SELECT `table`, topic, message_id, argMax(outcome, at) AS outcome, argMax(chunk, at) AS chunk, "
        f"max(at) AS newest FROM {REPAIRS} WHERE at >= {{since:DateTime64(3, 'UTC')}} "
        "GROUP BY `table`, topic, message_id"
    )
    done = f"(r.table, r.chunk) IN (SELECT `table`, chunk FROM {REPAIR_CHUNKS})"
    rows = client.rows(
        f"SELECT r.table, countIf(r.outcome = {{ok:String}} AND {done}), "
        "countIf(r.outcome = {bad:String}), "
        f"uniqExactIf(r.chunk, r.chunk > 0 AND NOT {done}), max(r.newest) "
        f"FROM ({newest}) AS r GROUP BY r.table ORDER BY r.table",
        {"since": sql_time(since), "ok": REPAIRED, "bad": STILL_INVALID},
    )
    return [
        TableRepairs(str(t), int(ok), int(bad), int(open_), as_utc(newest) if newest is not None else None)
        for t, ok, bad, open_, newest in rows
    ]


__all__ = ["TableRepairs", "read_repairs"]

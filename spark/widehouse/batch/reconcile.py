"""Reconcile an hour before publishing it: per topic, what the broker holds for the hour's
publish-time range vs what the stream counted in vs valid + quarantined + late.

Three independent sources: Pulsar's admin API (:mod:`.broker`), the stream's per-hour counts
(``stream_counts``: in and valid), and the rows the stream stored (``quarantine`` and
``late_events``, one row per message). A topic is ``ok`` when broker = counted in = valid +
quarantined + late; otherwise ``mismatch`` (``accepted`` when the run accepts mismatches), with a
detail that says which side is short.

Quarantined messages a repair folded into the table since (:mod:`widehouse.repair`; ``repairs``
rows of a done chunk) move from quarantined to valid: ``repaired`` says how many of the valid ones
came that way, so the sum still holds and the row shows the repair.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from widehouse.batch.broker import messages_between
from widehouse.contracts.periods import HOUR, as_hour, hour_text, sql_time
from widehouse.contracts.tables import COUNTS, LATE, QUARANTINE, REPAIR_CHUNKS, REPAIRED, REPAIRS

if TYPE_CHECKING:
    from widehouse.catalog import Catalog
    from widehouse.clickhouse import ClickHouse
    from widehouse.pulsar.admin import PulsarAdmin

OK, MISMATCH, ACCEPTED = "ok", "mismatch", "accepted"
_RANGE = "publish_time >= {a:DateTime64(3, 'UTC')} AND publish_time < {b:DateTime64(3, 'UTC')}"


@dataclass(frozen=True)
class TopicCheck:
    """One topic's figures for the hour."""

    topic: str
    broker: int
    counted_in: int
    valid: int
    quarantined: int
    late: int
    repaired: int = 0
    """Of ``valid``: quarantined messages a repair folded into the table (no longer in ``quarantined``)."""

    @property
    def problems(self) -> list[str]:
        found = []
        if self.broker > self.counted_in:
            found.append(f"{self.broker - self.counted_in} message(s) on the broker the stream did not count")
        elif self.counted_in > self.broker:
            found.append(
                f"the stream counted {self.counted_in - self.broker} message(s) more than the broker holds"
            )
        stored = self.valid + self.quarantined + self.late
        if stored != self.counted_in:
            found.append(
                f"counted in {self.counted_in} != valid {self.valid} + quarantined {self.quarantined} "
                f"+ late {self.late} = {stored}"
            )
        return found

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass(frozen=True)
class Reconciliation:
    table: str
    hour: dt.datetime
    topics: tuple[TopicCheck, ...]

    @property
    def mismatches(self) -> list[TopicCheck]:
        return [t for t in self.topics if not t.ok]

    @property
    def ok(self) -> bool:
        return not self.mismatches

    def summary(self) -> str:
        if self.ok:
            total = sum(t.broker for t in self.topics)
            head = f"{self.table} {hour_text(self.hour)}: {len(self.topics)} topic(s)"
            return f"{head}, {total} message(s), all reconciled"
        lines = [f"{self.table} {hour_text(self.hour)}: {len(self.mismatches)} topic(s) do not reconcile:"]
        lines += [f"  {t.topic}: {'; '.join(t.problems)}" for t in self.mismatches]
        return "\n".join(lines)

    def rows(self, run_id: str, accept: bool, checked_at: dt.datetime) -> list[dict[str, Any]]:
        """Rows of the ``reconciliation`` table."""
        out = []
        for check in self.topics:
            status = OK if check.ok else (ACCEPTED if accept else MISMATCH)
            out.append(
                {
                    **asdict(check),
                    "table": self.table,
                    "hour": self.hour,
                    "run_id": run_id,
                    "checked_at": checked_at,
                    "status": status,
                    "detail": "; ".join(check.problems),
                }
            )
        return out


def stream_side(client: ClickHouse, app: str, hour: dt.datetime) -> dict[str, tuple[int, int, int, int]]:
    """Topic -> (counted in, valid, quarantined, late) of the stream for the hour's publish range.

    Every app of the database counts (an app id replaced after a lost checkpoint continues where
    the old one stopped); ``app`` is kept for the callers' symmetry with the gate."""
    del app
    window = {"a": sql_time(hour), "b": sql_time(hour + HOUR)}
    counts = client.rows(
        f"SELECT topic, sum(rows_in), sum(rows_out) FROM {COUNTS} FINAL "
        "WHERE publish_hour = {a:DateTime64(3, 'UTC')} GROUP BY topic",
        window,
    )
    quarantined = client.rows(
        f"SELECT topic, uniqExact(message_id) FROM {QUARANTINE} WHERE {_RANGE} "
        "AND NOT startsWith(message_id, 'merge:') GROUP BY topic",
        window,
    )
    late = client.rows(
        f"SELECT topic, uniqExact(message_id) FROM {LATE} WHERE {_RANGE} GROUP BY topic",
        window,
    )
    result: dict[str, list[int]] = {}
    for topic, rows_in, rows_out in counts:
        result.setdefault(str(topic), [0, 0, 0, 0])[0:2] = [int(rows_in), int(rows_out)]
    for topic, n in quarantined:
        result.setdefault(str(topic), [0, 0, 0, 0])[2] = int(n)
    for topic, n in late:
        result.setdefault(str(topic), [0, 0, 0, 0])[3] = int(n)
    return {t: (v[0], v[1], v[2], v[3]) for t, v in result.items()}


def repaired_side(client: ClickHouse, table: str, hour: dt.datetime) -> dict[str, int]:
    """Topic -> messages of the hour's publish range that repairs folded into ``table`` (done chunks)."""
    rows = client.rows(
        f"SELECT topic, uniqExact(message_id) FROM {REPAIRS} WHERE `table` = {{t:String}} "
        f"AND outcome = '{REPAIRED}' AND {_RANGE} "
        f"AND chunk IN (SELECT chunk FROM {REPAIR_CHUNKS} WHERE `table` = {{t:String}}) GROUP BY topic",
        {"t": table, "a": sql_time(hour), "b": sql_time(hour + HOUR)},
    )
    return {str(t): int(n) for t, n in rows}


def reconcile(
    client: ClickHouse, admin: PulsarAdmin, catalog: Catalog, table: str, hour: dt.datetime, *, app: str
) -> Reconciliation:
    """Figures of every topic feeding ``table`` for ``hour``."""
    hour = as_hour(hour)
    stream = stream_side(client, app, hour)
    repaired = repaired_side(client, table, hour)
    checks = []
    for topic in catalog.topics_for(table):
        name = str(topic.name)
        counted_in, valid, quarantined, late = stream.get(name, (0, 0, 0, 0))
        fixed = repaired.get(name, 0)
        broker = messages_between(admin, topic.name, hour, hour + HOUR)
        checks.append(TopicCheck(name, broker, counted_in, valid + fixed, quarantined - fixed, late, fixed))
    return Reconciliation(table, hour, tuple(checks))

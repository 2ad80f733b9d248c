"""The daily merge of a daily wide table through its HBase day table (``widehouse daily``).

Steps for one day (each safe to repeat; a re-run, or a run after a crash at any point, publishes
the same rows):

0. **Lease and recovery**: the run holds the (table, day) publish lease (:mod:`widehouse.batch.lease`)
   from here to the end, so no other daily run and no hourly HBase refresh of the day (which takes
   the same lease) interleaves with it; a publication a crashed run prepared is rolled forward.
1. **Preconditions**, before anything is written: every Hive table the offline SQL reads has the
   day's partition (``dt=YYYY-MM-DD``), and the HBase Thrift server answers (the day table is
   created pre-split on the salt buckets if missing). Either failing is a clear error naming the
   partition or ``host:port``; nothing is written or published.
2. **Stream family** ``s`` := ClickHouse ``<T>_merged`` for the day
   (:func:`widehouse.hbase.refresh.refresh_stream_family`, also run by every hourly finalize).
   Nothing is written when the day's partials are what the last complete refresh read (usually
   the last hour's finalize): a fingerprint of them matches that refresh's marker.
   ``rewrite_stream`` (``--rewrite-stream``) writes the family anyway.
3. **Offline family** ``h`` := the catalog's offline Hive SQL for the day, written by Spark tasks,
   one per salt bucket (:func:`widehouse.hbase.spark.write_offline_family`).
4. **Extract**: one Spark task per salt bucket scans its prefix; a key seen only in the stream or
   only in Hive still gets a row, the other half null (counts 0)
   (:func:`widehouse.hbase.spark.extract_day`). The rows come as a stream in chunks, which step 5
   stages as it reads them: the driver holds a few chunks, not the day.
5. **Publish** (:func:`widehouse.batch.publish.publish`): staged in ClickHouse ``<T>_final``,
   prepared, committed to Delta ``silver/<T>``, then the ledger row that makes the day visible.
   An HBase failure in steps 2-4 stops the run before the publication is prepared, so nothing of
   the day is published (rows staged under a version the ledger never names stay invisible, and
   the next publication of the day deletes them).

The request and outcome live here (light); the use case is :func:`widehouse.batch.daily.spark.run_daily`.
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from widehouse.contracts.identity import OFFLINE_DATABASE

if TYPE_CHECKING:
    from widehouse.batch.publish import PublishResult
    from widehouse.hbase.day import FamilyWrite

STEPS = ("refresh-stream", "write-offline", "extract", "publish")
LEASE_WAIT = 900.0
"""Seconds a daily run waits for the day's lease (an hourly HBase refresh, or another daily run)."""


@dataclass(frozen=True)
class DailyRequest:
    day: dt.date
    table: str = "user_daily"
    salt_buckets: int | None = None
    """Overrides ``WIDEHOUSE_HBASE_SALT_BUCKETS`` (must match an existing day table's split)."""
    offline_database: str = OFFLINE_DATABASE
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    lease_wait: float = LEASE_WAIT
    """Seconds to wait while another run holds the day (then PeriodBusyError)."""
    rewrite_stream: bool = False
    """Write family ``s`` even when the last refresh read exactly the day's partials of now."""
    airflow_run: str = ""
    """The Airflow DAG run that runs this merge (``--airflow-run``), recorded in the ledger."""


@dataclass(frozen=True)
class DailyOutcome:
    table: str
    day: dt.date
    hbase_table: str
    buckets: int
    stream: FamilyWrite
    offline: FamilyWrite
    extracted: int
    published: PublishResult
    seconds: dict[str, float]
    """Wall time per step (``refresh-stream``, ``write-offline``, ``publish``: the extract is a
    stream publish stages as it reads, so its time is in ``publish`` and ``published.seconds['stage']``)."""

    def summary(self) -> str:
        timing = ", ".join(f"{k} {v:.1f}s" for k, v in self.seconds.items())
        stream = (
            f"unchanged since the last refresh ({self.stream.rows} stream row(s), nothing written)"
            if self.stream.unchanged
            else f"<- {self.stream.rows} stream row(s) ({self.stream.pruned} pruned)"
        )
        return "\n".join(
            [
                f"{self.table} {self.day}: {self.published.rows} daily row(s) published "
                f"(finalized_at {self.published.finalized_at.isoformat()})",
                f"  HBase {self.hbase_table} ({self.buckets} salt buckets): family s {stream}, "
                f"family h <- {self.offline.rows} offline "
                f"row(s) ({self.offline.pruned} pruned); extracted {self.extracted}",
                f"  time: {timing}",
            ]
        )


__all__ = ["LEASE_WAIT", "STEPS", "DailyOutcome", "DailyRequest"]

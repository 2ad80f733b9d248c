"""Refuse to start a slot group whose checkpoint is behind its sinks (lost or reset).

Batch ids come from the group's Spark checkpoint. If it is lost or reset they restart at 0, while
the sinks remember the batches they hold per (app, group): Delta skips every batch id up to the
app id's recorded transaction version, and ClickHouse skips batches it has committed, so the new
batches 0..N carrying *new* data would be dropped as replays. Before starting a group the job
compares the two and refuses when any sink is ahead of the checkpoint.

A sink may legitimately hold the checkpoint's last planned batch (a crash after the sinks wrote it,
before Spark recorded its commit): that batch is replayed as a no-op. Anything beyond it cannot come
from this checkpoint.

Recovery (README "Lost or reset checkpoint"): restore the checkpoint, or run the group under a new
app id (``WIDEHOUSE_STREAM_APP``), which has a fresh checkpoint, fresh subscriptions and fresh
idempotency keys, starting from the positions the old app committed (``--starting-offsets`` JSON).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from widehouse.errors import CheckpointError
from widehouse.stream.commits import last_written
from widehouse.stream.progress import BatchIdentity

if TYPE_CHECKING:
    from widehouse.clickhouse import ClickHouse
    from widehouse.stream.bronze import BronzeTable, BronzeWriter


def check_checkpoint(
    app: str, group: str, checkpoint: str, planned: int | None, sinks: Mapping[str, int | None]
) -> None:
    """Raise :class:`CheckpointError` when a sink holds a batch beyond the checkpoint's last planned
    batch ``planned`` (None: an empty or missing checkpoint). ``sinks``: sink -> its last batch of
    (app, group), None when it has none."""
    held = {sink: batch for sink, batch in sinks.items() if batch is not None}
    if not held:
        return
    ahead = max(held.values())
    if planned is not None and ahead <= planned:
        return
    where = ", ".join(f"{sink} batch {batch}" for sink, batch in sorted(held.items()))
    found = "is empty or missing" if planned is None else f"has planned batches only up to {planned}"
    raise CheckpointError(
        f"slot group {group!r} of app {app!r}: the sinks already hold ({where}) but its checkpoint "
        f"{checkpoint} {found}; the checkpoint was lost or reset, and its new batch ids would be "
        f"skipped by the sinks as replays (data loss). Restore the checkpoint, or run the group under "
        f"a new app id (WIDEHOUSE_STREAM_APP=<new id>) with --starting-offsets set to the positions "
        f"app {app!r} committed (README: 'Lost or reset checkpoint')"
    )


def sink_positions(
    clickhouse: ClickHouse | None,
    bronze: BronzeWriter | None,
    tables: Iterable[BronzeTable],
    app: str,
    group: str,
) -> dict[str, int | None]:
    """The last batch of (app, group) in each sink given: ClickHouse (progress rows or sink marks)
    and Delta (the largest transaction version of the group's app ids over ``tables``)."""
    found: dict[str, int | None] = {}
    if clickhouse is not None:
        found["clickhouse"] = last_written(clickhouse, app, group)
    if bronze is not None:
        identity = BatchIdentity(app, group, 0)
        versions = [bronze.version(t.path, identity.txn_app_id(t.name)) for t in tables]
        found["delta"] = max((v for v in versions if v is not None), default=None)
    return found

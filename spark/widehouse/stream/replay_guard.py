"""Refuse to replay a micro-batch under another catalog than the one it was first written with.

A batch killed inside its sinks is replayed by the next run under the same batch id, and the sinks'
idempotency keys (ClickHouse tokens, Delta ``txnVersion``) assume the replay writes the same rows.
A catalog change in between (a mapping, a type, a filter, a new column) breaks that: a sink that
already took the batch skips the new rows and the other takes them, so the two disagree for good.

So before its sinks, every batch records a fingerprint of the part of the catalog its group uses
(:func:`group_fingerprint`: the group's topics, the wide tables they feed, the event-time rules and
payload limit) in ``<group checkpoint>/widehouse/catalog/<batch>.json``, beside Spark's offset log.
A batch that finds a record of itself (a replay) with another fingerprint is refused with
:class:`CatalogChangedError`. Catalog changes between batches are not affected: a batch's record is
only compared with its own replay. A batch that fails before any sink write (its merge, a read the
sinks wait for) drops the record it made (:func:`drop_record`): nothing was written with that catalog.
A kill leaves it, which only refuses a replay under another catalog that would have been safe.

Pure apart from the small :class:`RecordFiles` protocol (the Spark side reads and writes the files
through the cluster's file system, see :mod:`widehouse.stream.spark.replay`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from widehouse.catalog import Catalog
from widehouse.errors import CatalogError

RECORD_DIR = "widehouse/catalog"
"""Where the records live, relative to the group's checkpoint."""
KEEP_BATCHES = 10
"""Records of batches this far behind the current one are deleted (only the last can be replayed)."""


class CatalogChangedError(CatalogError):
    """A batch is being replayed under another catalog than the one it was first written with."""


class RecordFiles(Protocol):
    """The few file operations the guard needs (local, HDFS, S3 ... behind it)."""

    def read(self, path: str) -> str | None:
        """The file's text, or None when there is no such file."""

    def write(self, path: str, text: str) -> None:
        """Write the file so that readers see all of it or nothing."""

    def delete(self, path: str) -> None:
        """Delete the file if it exists."""


@dataclass(frozen=True)
class BatchRecord:
    """The catalog a batch of (app, group) was written with."""

    app: str
    group: str
    batch_id: int
    fingerprint: str

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str, where: str) -> BatchRecord:
        try:
            body = json.loads(text)
            return cls(str(body["app"]), str(body["group"]), int(body["batch_id"]), str(body["fingerprint"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise CatalogError(f"unreadable catalog record {where}: {exc} (text {text[:200]!r})") from exc


def group_fingerprint(catalog: Catalog, topics: tuple[str, ...] | list[str]) -> str:
    """A short stable hash of what shapes a group's rows: its topics, the tables they feed, the rules.

    Topics and tables outside the group, and the tables' offline (Hive) columns, are left out, so
    changes elsewhere in the catalog do not refuse this group's replays.
    """
    described = catalog.describe()
    names = {str(catalog.topic(t).name) for t in topics}  # CatalogError naming an unknown topic
    tables = {table for t in topics for table in catalog.topic(t).tables}
    subset: dict[str, Any] = {
        "rules": described["rules"],
        "max_payload_bytes": described["max_payload_bytes"],
        "topics": [t for t in described["topics"] if t["name"] in names],
        "tables": [
            {k: v for k, v in w.items() if k != "offline"} for w in described["tables"] if w["name"] in tables
        ],
    }
    return hashlib.sha256(json.dumps(subset, sort_keys=True).encode()).hexdigest()[:16]


def record_path(checkpoint: str, batch_id: int) -> str:
    return f"{checkpoint.rstrip('/')}/{RECORD_DIR}/{batch_id}.json"


def check_replay(previous: BatchRecord | None, current: BatchRecord) -> None:
    """Raise :class:`CatalogChangedError` when ``current`` replays ``previous`` under another catalog."""
    if previous is None or previous.fingerprint == current.fingerprint:
        return
    raise CatalogChangedError(
        f"slot group {current.group} of app {current.app}: batch {current.batch_id} was first written "
        f"with catalog fingerprint {previous.fingerprint} and is being replayed with {current.fingerprint}; "
        "the replay would write other rows under the same batch id (the sinks' deduplication would then "
        "skip or double them). Recover either way: restore the catalog the batch was written with "
        f"(fingerprint {previous.fingerprint}), let the group finish the batch, then change the catalog "
        "again; or start a new app id (WIDEHOUSE_STREAM_APP) from the positions the sinks committed."
    )


def guard_replay(files: RecordFiles, checkpoint: str, current: BatchRecord) -> bool:
    """Check a batch against its record (if it is a replay), record it otherwise; prune old records.

    Call it before the batch's first sink write. Returns True when it recorded the batch (no record
    of it existed), False for a replay under the same catalog.
    """
    path = record_path(checkpoint, current.batch_id)
    text = files.read(path)
    previous = BatchRecord.from_json(text, path) if text is not None else None
    check_replay(previous, current)
    if previous is None:
        files.write(path, current.to_json())
    if current.batch_id >= KEEP_BATCHES:
        files.delete(record_path(checkpoint, current.batch_id - KEEP_BATCHES))
    return previous is None


def drop_record(files: RecordFiles, checkpoint: str, batch_id: int) -> None:
    """Delete the record :func:`guard_replay` has just made for ``batch_id``, when the batch failed
    before any sink write: nothing was written with its catalog, so its replay may use another.

    Only for a record this run made (``guard_replay`` returned True): an older one stands for
    sink writes of an earlier run."""
    files.delete(record_path(checkpoint, batch_id))

"""Read the app's other slot groups' checkpoints for topic handover (:mod:`widehouse.source.handover`).

Checkpoints live at ``<checkpoint root>/<app>/<group>``; Spark writes ``offsets/<n>`` when it plans
batch ``n`` and ``commits/<n>`` once the batch is written. For every other group directory this
reads the offset log entry of the last committed batch, and the newest planned one when it is not
committed, through the cluster's file system (local, HDFS, S3 ... as the session has). Costs a few
file-system calls per group read: one group (its own checkpoint) on most starts, every group of the
app when a plan gave the group topics its checkpoint does not have.
"""

from __future__ import annotations

import logging
from typing import Any

from widehouse.contracts.identity import app_checkpoint_root
from widehouse.errors import PulsarError
from widehouse.pulsar.positions import TopicPartition
from widehouse.settings import StreamSettings
from widehouse.source.handover import GroupCheckpoint, encode_marks, handover_marks
from widehouse.source.metrics import offsets_from_log
from widehouse.source.spark import read_text

log = logging.getLogger("widehouse.stream")


def start_after(spark: Any, stream: StreamSettings, group: str, topics: tuple[str, ...]) -> str | None:
    """The pulsar source's ``startAfter`` option for ``group`` (None when nothing is handed over).

    Only topics absent from the group's own checkpoint can be new to it, so a restart, or a start
    whose plan gave the group no new topic, reads one checkpoint; a group that got new topics reads
    every group's of the app.
    """
    app_root = app_checkpoint_root(stream.checkpoint_root, stream.app)
    fs = _file_system(spark, app_root)
    own = _group_checkpoint(spark, fs, group, stream.checkpoint(group))
    latest = own.pending or own.committed
    known = {tp.topic for tp in latest.partitions} if latest is not None else set()
    new = tuple(t for t in topics if TopicPartition.of(t).topic not in known)
    if not new:
        return None
    checkpoints = [cp for cp in group_checkpoints(spark, app_root) if cp.group != group]
    marks = handover_marks(group, new, checkpoints)
    if not marks:
        return None
    log.info(
        "group %s: %d partition(s) new to it continue where other groups of app %s committed them",
        group,
        len(marks),
        stream.app,
    )
    return encode_marks(marks)


def group_checkpoints(spark: Any, app_root: str) -> list[GroupCheckpoint]:
    """What every group checkpoint under ``app_root`` committed (and planned beyond that)."""
    fs = _file_system(spark, app_root)
    root = spark.sparkContext._jvm.org.apache.hadoop.fs.Path(app_root)
    if not fs.exists(root):
        return []
    found = []
    for status in fs.listStatus(root):
        if not status.isDirectory():
            continue
        path = status.getPath()
        found.append(_group_checkpoint(spark, fs, str(path.getName()), str(path.toString())))
    return found


def _file_system(spark: Any, location: str) -> Any:
    path = spark.sparkContext._jvm.org.apache.hadoop.fs.Path(location)
    return path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())


def _batch_ids(spark: Any, fs: Any, directory: str) -> list[int]:
    path = spark.sparkContext._jvm.org.apache.hadoop.fs.Path(directory)
    if not fs.exists(path):
        return []
    names = (str(s.getPath().getName()) for s in fs.listStatus(path))
    return sorted(int(n) for n in names if n.isdigit())


def _group_checkpoint(spark: Any, fs: Any, group: str, location: str) -> GroupCheckpoint:
    planned = _batch_ids(spark, fs, f"{location}/offsets")
    committed = _batch_ids(spark, fs, f"{location}/commits")
    last_commit = committed[-1] if committed else None
    last_plan = planned[-1] if planned else None

    def offset(batch: int) -> Any:
        path = f"{location}/offsets/{batch}"
        try:
            return offsets_from_log(read_text(spark, path))
        except Exception as exc:  # py4j wraps the JVM's errors; name the file
            raise PulsarError(f"cannot read the offset log {path} of group {group}: {exc}") from exc

    unfinished = last_plan is not None and (last_commit is None or last_plan > last_commit)
    pending = last_plan if unfinished else None
    return GroupCheckpoint(
        group=group,
        committed=offset(last_commit) if last_commit is not None and last_commit in planned else None,
        committed_batch=last_commit,
        pending=offset(pending) if pending is not None else None,
        pending_batch=pending,
    )

"""The replay guard's files through the cluster's file system (:mod:`widehouse.stream.replay_guard`).

The records sit in the group's checkpoint, so they go wherever Spark's offset log goes (local, HDFS,
S3 ...): written and read through Hadoop's ``FileSystem`` of the session
(:class:`widehouse.spark.hadoop_files.HadoopFiles`), a few calls per batch.
"""

from __future__ import annotations

from typing import Any

from widehouse.spark.hadoop_files import HadoopFiles
from widehouse.stream.progress import BatchIdentity
from widehouse.stream.replay_guard import BatchRecord, drop_record, guard_replay


def guard_batch(spark: Any, checkpoint: str, fingerprint: str, batch: BatchIdentity) -> bool:
    """Refuse a replay of ``batch`` under a changed catalog (``fingerprint``: the group's, from
    :func:`widehouse.stream.replay_guard.group_fingerprint`); record the catalog of a new batch
    (then True)."""
    record = BatchRecord(batch.app, batch.group, batch.batch_id, fingerprint)
    return guard_replay(HadoopFiles.of(spark), checkpoint, record)


def drop_batch_record(spark: Any, checkpoint: str, batch: BatchIdentity) -> None:
    """Delete the record :func:`guard_batch` made for ``batch`` (it failed before any sink write)."""
    drop_record(HadoopFiles.of(spark), checkpoint, batch.batch_id)

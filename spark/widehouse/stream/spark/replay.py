"""The replay guard's files through the cluster's file system (:mod:`widehouse.stream.replay_guard`).

The records sit in the group's checkpoint, so they go wherever Spark's offset log goes (local, HDFS,
S3 ...): written and read through Hadoop's ``FileSystem`` of the session
(:class:`widehouse.spark.hadoop_files.HadoopFiles`), a few calls per batch.
"""

from __future__ import annotations

from typing import Any

from widehouse.spark.hadoop_files import HadoopFiles
from widehouse.stream.progress import BatchIdentity
from widehouse.stream.replay_guard import BatchRecord, guard_replay


def guard_batch(spark: Any, checkpoint: str, fingerprint: str, batch: BatchIdentity) -> None:
    """Refuse a replay of ``batch`` under a changed catalog (``fingerprint``: the group's, from
    :func:`widehouse.stream.replay_guard.group_fingerprint`); record the catalog of a new batch."""
    record = BatchRecord(batch.app, batch.group, batch.batch_id, fingerprint)
    guard_replay(HadoopFiles.of(spark), checkpoint, record)

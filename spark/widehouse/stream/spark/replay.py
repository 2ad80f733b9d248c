"""The replay guard's files through the cluster's file system (:mod:`widehouse.stream.replay_guard`).

The records sit in the group's checkpoint, so they go wherever Spark's offset log goes (local, HDFS,
S3 ...): written and read through Hadoop's ``FileSystem`` of the session, a few calls per batch.
"""

from __future__ import annotations

from typing import Any

from widehouse.catalog import Catalog
from widehouse.errors import CatalogError
from widehouse.stream.progress import BatchIdentity
from widehouse.stream.replay_guard import BatchRecord, group_fingerprint, guard_replay


class HadoopFiles:
    """:class:`widehouse.stream.replay_guard.RecordFiles` on the session's Hadoop file systems."""

    def __init__(self, spark: Any) -> None:
        self._jvm = spark.sparkContext._jvm
        self._conf = spark.sparkContext._jsc.hadoopConfiguration()

    def _path(self, path: str) -> tuple[Any, Any]:
        hadoop_path = self._jvm.org.apache.hadoop.fs.Path(path)
        return hadoop_path, hadoop_path.getFileSystem(self._conf)

    def read(self, path: str) -> str | None:
        hadoop_path, fs = self._path(path)
        if not fs.exists(hadoop_path):
            return None
        stream = fs.open(hadoop_path)
        try:
            return str(self._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
        finally:
            stream.close()

    def write(self, path: str, text: str) -> None:
        """Write a temporary file, then rename it (all or nothing for a reader, also after a kill)."""
        hadoop_path, fs = self._path(path)
        temporary = self._jvm.org.apache.hadoop.fs.Path(f"{path}.tmp")
        out = fs.create(temporary, True)
        try:
            out.write(bytearray(text.encode("utf-8")))
        finally:
            out.close()
        if not fs.rename(temporary, hadoop_path):
            raise CatalogError(f"cannot rename {path}.tmp to {path} (the replay guard's catalog record)")

    def delete(self, path: str) -> None:
        hadoop_path, fs = self._path(path)
        fs.delete(hadoop_path, False)


def guard_batch(
    spark: Any, checkpoint: str, catalog: Catalog, topics: tuple[str, ...], batch: BatchIdentity
) -> None:
    """Refuse a replay of ``batch`` under a changed catalog; record the catalog of a new batch."""
    record = BatchRecord(batch.app, batch.group, batch.batch_id, group_fingerprint(catalog, topics))
    guard_replay(HadoopFiles(spark), checkpoint, record)

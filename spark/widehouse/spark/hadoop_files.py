"""Small text files through the session's Hadoop file systems (local, HDFS, S3 ... as the cluster has).

The stream reads and writes a few per micro-batch: the offset log's metrics
(:func:`widehouse.source.spark.read_batch_log`) and the replay guard's records
(:mod:`widehouse.stream.spark.replay`). Each is a handful of py4j calls; resolving a JVM class by
name is one more per package step (``org``, ``org.apache``, ...), and every miss scans the class
path, so :class:`HadoopFiles` resolves its classes once and is kept per Spark context
(:meth:`HadoopFiles.of`).
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from widehouse.errors import CheckpointError


class HadoopFiles:
    """Read, write (all or nothing) and delete small text files; see the module docstring."""

    _kept: weakref.WeakKeyDictionary[Any, HadoopFiles] = weakref.WeakKeyDictionary()
    _lock = threading.Lock()

    def __init__(self, context: Any) -> None:
        jvm = context._jvm
        self._conf = context._jsc.hadoopConfiguration()
        self._path_class = jvm.org.apache.hadoop.fs.Path
        self._io = jvm.org.apache.commons.io.IOUtils

    @classmethod
    def of(cls, spark: Any) -> HadoopFiles:
        """The files of ``spark``'s context (one per context, made on first use)."""
        context = spark.sparkContext
        with cls._lock:
            files = cls._kept.get(context)
            if files is None:
                files = cls._kept[context] = cls(context)
            return files

    def _path(self, path: str) -> tuple[Any, Any]:
        hadoop_path = self._path_class(path)
        return hadoop_path, hadoop_path.getFileSystem(self._conf)

    def read(self, path: str) -> str | None:
        """The file's text, or None when there is no such file."""
        hadoop_path, fs = self._path(path)
        if not fs.exists(hadoop_path):
            return None
        stream = fs.open(hadoop_path)
        try:
            return str(self._io.toString(stream, "UTF-8"))
        finally:
            stream.close()

    def write(self, path: str, text: str) -> None:
        """Write a temporary file, then rename it (all or nothing for a reader, also after a kill).
        The file must not exist yet: Hadoop's rename does not replace one."""
        hadoop_path, fs = self._path(path)
        temporary = self._path_class(f"{path}.tmp")
        out = fs.create(temporary, True)
        try:
            out.write(bytearray(text.encode("utf-8")))
        finally:
            out.close()
        if not fs.rename(temporary, hadoop_path):
            raise CheckpointError(f"cannot rename {path}.tmp to {path}")

    def delete(self, path: str) -> None:
        """Delete the file if it exists."""
        hadoop_path, fs = self._path(path)
        fs.delete(hadoop_path, False)

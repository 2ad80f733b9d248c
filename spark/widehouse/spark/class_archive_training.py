"""The training run of :mod:`widehouse.spark.class_archive`: ``python -m ... <archive path>``.

Starts a driver JVM that writes the classes it loaded to ``<archive path>`` when it exits, runs what
Widehouse's jobs run at toy size and without services (Python workers and Arrow, a shuffle, a Python
data source read as a batch and as a micro-batch stream with ``foreachBatch``, Delta writes and reads
by path, as Spark reads the tables delta-rs writes), then stops Spark and waits for the JVM to
exit, so the archive is complete when this process ends.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from widehouse.settings import load_settings
from widehouse.spark.class_archive import QUIET
from widehouse.spark.session import build_session

ROWS = 64


class _Reader(DataSourceReader):
    def read(self, partition: InputPartition) -> Iterator[tuple[int, str]]:
        yield from ((i, f"u{i % 7}") for i in range(ROWS))


class _StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """As the ``pulsar`` source reads: a row budget, AvailableNow, Arrow batches out of each task."""

    def initialOffset(self) -> dict[str, int]:  # noqa: N802 (PySpark's API)
        return {"at": 0}

    def getDefaultReadLimit(self) -> ReadLimit:  # noqa: N802
        return ReadMaxRows(ROWS)

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802
        pass

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:  # noqa: N802
        return {"at": min(start["at"] + 1, 2)}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        return [InputPartition(i) for i in range(start["at"], end["at"])]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        ids = list(range(ROWS))
        yield pa.RecordBatch.from_pydict({"id": ids, "user": [f"u{i % 7}" for i in ids]})


class TrainingSource(DataSource):
    """Rows ``(id, user)``; one micro-batch."""

    @classmethod
    def name(cls) -> str:
        return "widehouse_class_archive_training"

    def schema(self) -> str:
        return "id long, user string"

    def reader(self, schema: StructType) -> DataSourceReader:
        return _Reader()

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802
        return _StreamReader()


def _same(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield from batches


def train(archive: Path) -> None:
    settings = load_settings()
    spark = build_session(
        settings,
        "widehouse-class-archive",
        {
            "spark.sql.catalogImplementation": "in-memory",
            "spark.driver.extraJavaOptions": f"-XX:ArchiveClassesAtExit={archive} {QUIET}",
        },
    )
    with tempfile.TemporaryDirectory(prefix="widehouse-class-archive-") as scratch:
        delta = f"{scratch}/delta"
        spark.range(ROWS, numPartitions=2).mapInArrow(_same, "id long").groupBy("id").count().collect()
        spark.dataSource.register(TrainingSource)
        rows = spark.read.format(TrainingSource.name()).load()
        rows.write.format("delta").mode("overwrite").save(delta)

        def write(batch: DataFrame, batch_id: int) -> None:
            batch.groupBy("user").count().write.format("delta").mode("append").save(f"{scratch}/counts")

        query = (
            spark.readStream.format(TrainingSource.name())
            .load()
            .writeStream.option("checkpointLocation", f"{scratch}/checkpoint")
            .foreachBatch(write)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        spark.read.format("delta").load(delta).where("id > 3").agg({"id": "max"}).collect()
        spark.read.format("delta").option("versionAsOf", 0).load(f"{scratch}/counts").count()
    gateway = spark.sparkContext._gateway
    spark.stop()
    # the JVM writes the archive as it exits: end it (stdin closed) and wait for it
    process = getattr(gateway, "proc", None)
    if process is not None:
        if process.stdin is not None:
            process.stdin.close()
        process.wait(timeout=120)


if __name__ == "__main__":
    train(Path(sys.argv[1]))

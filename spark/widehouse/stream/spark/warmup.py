"""Start Spark's Python workers while the driver plans the first micro-batch.

The first Python task of a Spark application pays for starting the worker processes, importing the
transform, the fast path and the Pulsar client into them, and the JVM's first job (several seconds
on a small machine). Left to the first micro-batch, that start-up sits on the batch's critical path
right after the driver spent its own start-up planning it (discovery, subscriptions, offsets).
:func:`warm_workers` runs one tiny job in the background as the app starts, so both happen at once;
Spark reuses the warmed workers for the stream's reading tasks (``spark.python.worker.reuse``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

log = logging.getLogger("widehouse.stream")


def _import_readers(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Runs in each worker: import what a reading task runs (the source, transform, Pulsar client)."""
    import _pulsar  # noqa: F401

    import widehouse.stream.spark.source  # noqa: F401

    yield from batches


def warm_workers(spark: SparkSession) -> threading.Thread:
    """Start one worker per task slot in the background; returns the (daemon) thread."""

    def run() -> None:
        try:
            slots = max(1, spark.sparkContext.defaultParallelism)
            spark.range(slots, numPartitions=slots).mapInArrow(_import_readers, "id long").collect()
        except Exception as exc:  # only an optimization: the first batch starts them anyway
            log.info("warming Spark's Python workers failed (%s); the first batch will start them", exc)

    thread = threading.Thread(target=run, name="widehouse-warm-workers", daemon=True)
    thread.start()
    return thread

"""Start Spark's Python workers while the driver plans the first micro-batch.

The first Python task of a Spark application pays for starting the worker processes, importing the
transform, the fast path and the Pulsar client into them, and the JVM's first job (several seconds
on a small machine); the first task that meets a topic in a worker compiles its fast-path handler
(~0.3 ms a topic: ~0.3 s a worker with 1,000 topics). Left to the first micro-batch, that sits on
the batch's critical path right after the driver spent its own start-up planning it (discovery,
subscriptions, offsets: REST calls, the worker side idle). :func:`warm_workers` runs one tiny job
in the background as the app starts, which imports those modules and compiles the app's handlers
in each worker, so both happen at once; Spark reuses the warmed workers for the stream's reading
tasks (``spark.python.worker.reuse``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

    from widehouse.stream.transform import TransformPlan

log = logging.getLogger("widehouse.stream")


def _readers(
    plan: TransformPlan, topics: Sequence[str]
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """What each warming task runs: import what a reading task runs (the source, transform, Pulsar
    client), then compile the handlers of ``topics`` (the app's) under ``plan``."""

    def warm(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import _pulsar  # noqa: F401

        import widehouse.stream.spark.source  # noqa: F401
        from widehouse.stream.transform import compile_handlers

        compile_handlers(plan, topics)
        yield from batches

    return warm


def warm_workers(spark: SparkSession, plan: TransformPlan, topics: Sequence[str]) -> threading.Thread:
    """Start one worker per task slot in the background, with ``topics``' handlers compiled under
    ``plan`` (any plan holding the tables they feed: a handler depends on its topic alone); returns
    the (daemon) thread."""
    warm = _readers(plan, list(topics))

    def run() -> None:
        try:
            slots = max(1, spark.sparkContext.defaultParallelism)
            spark.range(slots, numPartitions=slots).mapInArrow(warm, "id long").collect()
        except Exception as exc:  # only an optimization: the first batch starts them anyway
            log.info("warming Spark's Python workers failed (%s); the first batch will start them", exc)

    thread = threading.Thread(target=run, name="widehouse-warm-workers", daemon=True)
    thread.start()
    return thread

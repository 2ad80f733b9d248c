"""Start Spark's Python workers while the driver plans the first micro-batch.

The first Python task of a Spark application pays for starting the worker processes, importing the
transform, the fast path and the Pulsar client into them, and the JVM's first job (several seconds
on a small machine); the first task that meets a topic in a worker compiles its fast-path handler
(~0.3 ms a topic: ~0.3 s a worker with 1,000 topics), and the first output it builds imports
pandas (pyarrow does, ~0.25 s). Left to the first micro-batch, that sits on the batch's critical
path right after the driver spent its own start-up planning it (discovery, subscriptions, offsets:
REST calls, the worker side idle). :func:`warm_workers` runs one tiny job in the background as the
app starts, which imports those modules and compiles the app's handlers in each worker, so both
happen at once; Spark reuses the warmed workers for the stream's reading tasks
(``spark.python.worker.reuse``). :func:`plan_read_early` does the same for the one piece of
the first batch's planning that Spark leaves until after the batch was planned: how the group's
Python source is read.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

    from widehouse.stream.plan import TransformPlan

log = logging.getLogger("widehouse.stream")


def _readers(
    plan: TransformPlan, topics: Sequence[str]
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """What each warming task runs: import what a reading task runs (the source, transform, Pulsar
    client), then compile the handlers of ``topics`` (the app's) under ``plan``."""

    def warm(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import _pulsar  # noqa: F401
        import pyarrow as pa

        import widehouse.stream.spark.source  # noqa: F401
        from widehouse.stream.transform import compile_handlers

        compile_handlers(plan, topics)
        # a task's output is built from Python values, and pyarrow imports pandas on its first such
        # array (~0.25 core-s): here, rather than in each worker's first reading task
        pa.array([0], pa.int64())
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


def plan_read_early(spark: SparkSession, frame: Any) -> threading.Thread:
    """Have Spark plan how the streaming DataFrame ``frame`` reads its Python source, on a thread,
    while its query starts.

    Spark plans a Python data source's read (``plan_data_source_read``: a Python process that
    unpickles the source, makes its stream reader and pickles the read function back) when the
    query's first micro-batch builds its scan, after the batch was planned: ~0.5 s of the first
    batch's critical path in a new process on two cores (~0.3 core-s), with the reading tasks
    waiting for it. Spark keeps the result on the source's provider object, which ``frame``'s
    analyzed relation already holds and the query reuses (``PythonDataSourceV2.getOrCreateReadInfo``),
    so asking for it now overlaps it with the query's start (its source runner's start and first
    offsets). Only an optimization: anything unexpected (another Spark, another source) leaves the
    first batch to plan the read as before. A first batch that needs the plan before this thread
    has it makes it too (the provider does not lock): the same plan, made twice.
    """

    def run() -> None:
        try:
            leaves = frame._jdf.queryExecution().analyzed().collectLeaves().iterator()  # py4j
            relations = []
            while leaves.hasNext():
                leaf = leaves.next()
                if leaf.getClass().getSimpleName() == "StreamingRelationV2":
                    relations.append(leaf)
            if len(relations) != 1:
                return
            relation = relations[0]
            provider = relation.source().get()
            if provider.getClass().getSimpleName() != "PythonDataSourceV2":
                return
            # this JVM thread plans as the query's does: with the session's conf, not the defaults
            jvm = spark.sparkContext._jvm
            assert jvm is not None
            jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
            provider.getOrCreateReadInfo(
                relation.sourceName(), relation.extraOptions(), relation.table().schema(), True
            )
        except Exception as exc:  # only an optimization: the first batch plans the read anyway
            log.debug("planning the read early failed (%s); the first batch plans it", exc)

    thread = threading.Thread(target=run, name="widehouse-plan-read", daemon=True)
    thread.start()
    return thread

"""The stream warms Spark as it starts: its reading tasks find the Python workers ready, the app's
fast-path handlers compiled, and its first batch finds its source's read planned."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from widehouse.catalog import load_catalog
from widehouse.stream.plan import TransformPlan
from widehouse.stream.spark.warmup import plan_read_early, warm_workers

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_warmed_workers_have_the_reading_code_imported_and_the_handlers_compiled(spark: Any) -> None:
    catalog = load_catalog(Path(__file__).parents[2] / "schemas")
    topics = [str(t.name) for t in catalog.topics][:3]
    files = {f"<widehouse fast path: {t}>" for t in topics}

    def imported(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """What the worker running this task had before it (made here: shipped by value)."""
        for batch in batches:
            flag = all(m in sys.modules for m in ("widehouse.stream.spark.source", "_pulsar", "pandas"))
            fastpath = sys.modules.get("widehouse.stream.fastpath")
            cached = {code.co_filename for code in getattr(fastpath, "_CODE", {}).values()}
            flag = flag and files <= cached
            yield pa.RecordBatch.from_pydict({"ready": [flag] * batch.num_rows})

    thread = warm_workers(spark, TransformPlan.for_topics(catalog, topics), topics)
    thread.join(120)
    assert not thread.is_alive()
    slots = spark.sparkContext.defaultParallelism
    rows = spark.range(slots, numPartitions=slots).mapInArrow(imported, "ready boolean").collect()
    assert rows and all(r.ready for r in rows)


def _field(obj: Any, name: str) -> Any:
    """A JVM object's (private) field ``name``, declared by its class or a superclass (reflection)."""
    from py4j.protocol import Py4JJavaError

    klass = obj.getClass()
    while klass is not None:
        try:
            field = klass.getDeclaredField(name)
        except Py4JJavaError:
            klass = klass.getSuperclass()
            continue
        field.setAccessible(True)
        return field.get(obj)
    raise AssertionError(f"no field {name} on {obj.getClass().getName()}")


def _provider(frame: Any) -> Any:
    """The Python data source provider of a streaming DataFrame's (only) relation."""
    leaves = frame._jdf.queryExecution().analyzed().collectLeaves()
    assert leaves.size() == 1
    return leaves.head().source().get()


def test_a_python_sources_read_is_planned_before_the_first_batch_and_the_query_reuses_it(
    spark: Any, tmp_path: Path
) -> None:
    """``plan_read_early`` leaves the read planned on the source's provider (Spark's
    ``plan_data_source_read`` ran), and the query's stream takes that very plan for its batch,
    which reads every row: the first batch plans nothing again."""
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

    class Reader(DataSourceStreamReader):
        def initialOffset(self) -> dict[str, int]:
            return {"n": 0}

        def latestOffset(self) -> dict[str, int]:
            return {"n": 3}

        def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
            return [InputPartition((start["n"], end["n"]))]

        def read(self, partition: InputPartition) -> Iterator[tuple[int]]:
            first, end = partition.value
            yield from ((n,) for n in range(first, end))

    class Counter(DataSource):
        @classmethod
        def name(cls) -> str:
            return "widehouse_test_counter"

        def schema(self) -> str:
            return "n long"

        def streamReader(self, schema: Any) -> DataSourceStreamReader:
            return Reader()

    spark.dataSource.register(Counter)
    frame = spark.readStream.format("widehouse_test_counter").load()
    provider = _provider(frame)
    assert _field(provider, "readInfo") is None  # a new provider: nothing planned yet
    thread = plan_read_early(spark, frame)
    thread.join(120)
    assert not thread.is_alive()
    planned = _field(provider, "readInfo")
    assert planned is not None

    seen: list[int] = []
    query = (
        frame.writeStream.option("checkpointLocation", str(tmp_path / "checkpoint"))
        .foreachBatch(lambda df, _batch_id: seen.extend(r.n for r in df.collect()))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120)
    assert sorted(seen) == [0, 1, 2]
    stream = query._jsq.streamingQuery().sources().head()
    system = spark.sparkContext._jvm.java.lang.System
    assert system.identityHashCode(_field(stream, "readInfo")) == system.identityHashCode(planned)


def test_planning_a_read_early_leaves_other_sources_alone(spark: Any) -> None:
    """A source that is not a Python data source (Spark's own ``rate``): the thread ends quietly,
    and the query plans as it always does."""
    thread = plan_read_early(spark, spark.readStream.format("rate").load())
    thread.join(60)
    assert not thread.is_alive()

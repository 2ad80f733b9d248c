"""The stream warms Spark's Python workers as it starts: its reading tasks find them ready, the
app's fast-path handlers compiled."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from widehouse.catalog import load_catalog
from widehouse.stream.spark.warmup import warm_workers
from widehouse.stream.transform import TransformPlan

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_warmed_workers_have_the_reading_code_imported_and_the_handlers_compiled(spark: Any) -> None:
    catalog = load_catalog(Path(__file__).parents[2] / "schemas")
    topics = [str(t.name) for t in catalog.topics][:3]
    files = {f"<widehouse fast path: {t}>" for t in topics}

    def imported(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """What the worker running this task had before it (made here: shipped by value)."""
        for batch in batches:
            flag = "widehouse.stream.spark.source" in sys.modules and "_pulsar" in sys.modules
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

"""The stream warms Spark's Python workers as it starts: its reading tasks find them ready."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

from widehouse.stream.spark.warmup import warm_workers

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_warmed_workers_have_the_reading_code_imported(spark: Any) -> None:
    def imported(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """What the worker running this task imported before it (made here: shipped by value)."""
        for batch in batches:
            flag = "widehouse.stream.spark.source" in sys.modules and "_pulsar" in sys.modules
            yield pa.RecordBatch.from_pydict({"ready": [flag] * batch.num_rows})

    thread = warm_workers(spark)
    thread.join(120)
    assert not thread.is_alive()
    slots = spark.sparkContext.defaultParallelism
    rows = spark.range(slots, numPartitions=slots).mapInArrow(imported, "ready boolean").collect()
    assert rows and all(r.ready for r in rows)

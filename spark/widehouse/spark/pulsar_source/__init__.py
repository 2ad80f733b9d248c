"""The ``pulsar`` Spark data source (Python data source API, PySpark 4.2).

Usage::

    from widehouse.spark.pulsar_source import register, source_options, batch_metrics
    register(spark)
    df = (spark.readStream.format("pulsar")
          .options(**source_options(settings.pulsar, topics, appId="group-7",
                                    startingOffsets="earliest", maxMessagesPerTrigger=500_000))
          .load())

Modules: :mod:`.options` (every option, validated), :mod:`.controller` (driver side: offsets,
admission control, commits), :mod:`.planning` (tasks), :mod:`.reader` (executor side, Arrow),
:mod:`.metrics` (per-topic rows and lag of a batch), :mod:`.source` (the pyspark adapters).
Only :mod:`.source` and :mod:`.metrics` use pyspark; names below load lazily.
"""

from __future__ import annotations

from typing import Any

from widehouse.pulsar.offsets import TopicBatchMetrics
from widehouse.spark.pulsar_source.options import source_options
from widehouse.spark.pulsar_source.schema import SCHEMA_DDL

__all__ = [
    "SCHEMA_DDL",
    "PulsarDataSource",
    "TopicBatchMetrics",
    "batch_metrics",
    "register",
    "source_options",
]


def __getattr__(name: str) -> Any:
    if name in ("PulsarDataSource", "register"):
        from widehouse.spark.pulsar_source import source

        return getattr(source, name)
    if name == "batch_metrics":
        from widehouse.spark.pulsar_source.metrics import batch_metrics

        return batch_metrics
    raise AttributeError(name)

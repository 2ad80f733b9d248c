"""The ``pulsar`` Spark data source (Python data source API, PySpark 4.2).

Usage::

    from widehouse.source import register, source_options, batch_metrics
    register(spark)
    df = (spark.readStream.format("pulsar")
          .options(**source_options(settings.pulsar, topics, appId="group-7",
                                    startingOffsets="earliest", maxMessagesPerTrigger=500_000))
          .load())

Modules: :mod:`.options` (every option, validated), :mod:`.controller` (driver side: offsets,
admission control, commits), :mod:`.planning` (tasks), :mod:`.reader` (executor side, Arrow),
:mod:`.metrics` (per-topic rows and lag of a batch, from Spark's offset log), :mod:`.broker`
(what the source asks the brokers), :mod:`.subscriptions` and :mod:`.cleanup` (durable
subscriptions moved on commit, and removed for retired apps), :mod:`.spark` (the pyspark adapters
and the offset-log reader). Only :mod:`.spark` imports pyspark; names below load lazily.
"""

from __future__ import annotations

from typing import Any

from widehouse.lazy import lazy_attribute
from widehouse.source.offsets import TopicBatchMetrics
from widehouse.source.options import source_options
from widehouse.source.schema import SCHEMA_DDL

__all__ = [
    "SCHEMA_DDL",
    "PulsarDataSource",
    "TopicBatchMetrics",
    "batch_metrics",
    "register",
    "source_options",
]


_LAZY = {
    "PulsarDataSource": "widehouse.source.spark",
    "register": "widehouse.source.spark",
    "batch_metrics": "widehouse.source.spark",
}


def __getattr__(name: str) -> Any:
    return lazy_attribute(globals(), _LAZY, name)

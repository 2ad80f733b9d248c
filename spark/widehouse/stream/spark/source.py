"""The stream's source: the ``pulsar`` source's micro-batches, transformed inside the reading task.

A slot group's query could read ``format("pulsar")`` and transform with ``mapInArrow``: then every
message crosses from the reader's Python worker into the JVM as a Spark row, and back out to a
second Python worker as Arrow, before the transform collapses it into a few partial rows. Here the
reading task runs the transform itself (:func:`widehouse.stream.transform.transform_packed` over
:func:`widehouse.source.reader.read_messages`' chunks, in the same process: the read loop's lists as
they are, no Arrow batch, no message id but those of quarantined and late rows), so only the
collapsed output crosses into Spark, as Arrow IPC bytes (``wh_ipc``, one cell per output batch).

Everything else is the ``pulsar`` source's: the options, offsets, admission control, task
planning, commits and the offset log that progress metrics come from, so a checkpoint written
through either format is read the same way. The source is registered per group under its own
name (:func:`register_wide_source`) because it carries the group's :class:`TransformPlan`; the class
is made inside a function, so Spark ships it, plan included, by value to its Python processes.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from widehouse.errors import ConfigError
from widehouse.source.options import ReadConfig, SourceOptions, parse_options
from widehouse.source.reader import read_messages
from widehouse.source.spark import (
    PulsarBatchReader,
    PulsarDataSource,
    PulsarInputPartition,
    PulsarStreamReader,
)
from widehouse.stream.plan import TransformPlan

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession
    from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
    from pyspark.sql.types import StructType

PACKED_DDL = "wh_ipc binary"
"""The Spark schema of :data:`widehouse.stream.transform.PACKED_SCHEMA`."""


def _transformed(
    partition: InputPartition, config: ReadConfig, plan: TransformPlan
) -> Iterator[pa.RecordBatch]:
    """What a reading task yields: the transform's packed output over the task's messages.

    The transform (and pyarrow with it) is imported here, in the task: Spark's ``create_data_source``
    process unpickles the group's source only to ask its schema, and needs neither (~65 ms a group,
    on the start-up's path; the warm-up imports both into the workers)."""
    from widehouse.stream.transform import transform_packed

    if not isinstance(partition, PulsarInputPartition):  # Spark's stand-in for "no partitions"
        return iter(())
    # the transform reads the payload, topic, id and publish time only
    return transform_packed(read_messages(partition.task, dataclasses.replace(config, metadata=False)), plan)


class _Transforming:
    """What the wide readers add to the ``pulsar`` ones: each task yields the transform's packed
    output over its messages (:func:`_transformed`)."""

    plan: TransformPlan
    read_config: ReadConfig

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _transformed(partition, self.read_config, self.plan)


class WideStreamReader(_Transforming, PulsarStreamReader):
    """The ``pulsar`` stream reader whose tasks yield the transform's packed output."""

    def __init__(self, options: SourceOptions, plan: TransformPlan) -> None:
        super().__init__(options)
        self.plan = plan


class WideBatchReader(_Transforming, PulsarBatchReader):
    """The same for ``spark.read`` (between startingOffsets and endingOffsets): benchmarks, backfills."""

    def __init__(self, options: SourceOptions, plan: TransformPlan) -> None:
        super().__init__(options)
        self.plan = plan


def wide_source_name(app: str, group: str, plan: TransformPlan) -> str:
    """A format name per (app, group, catalog and tables): a changed plan gets a new name."""
    digest = hashlib.sha256(
        repr((plan.catalog.fingerprint, plan.tables, plan.payload_limit, plan.fast_path)).encode()
    ).hexdigest()
    safe = "".join(c if c.isalnum() else "_" for c in f"{app}_{group}")
    return f"widehouse_wide_{safe}_{digest[:10]}"


def wide_source(name: str, plan: TransformPlan) -> type[PulsarDataSource]:
    """The group's data source class: made here, so cloudpickle ships it (and ``plan``) by value."""

    class WideDataSource(PulsarDataSource):
        """``readStream.format(<name>)``: the ``pulsar`` options; rows are packed transform output."""

        @classmethod
        def name(cls) -> str:
            return name

        def schema(self) -> str:
            return PACKED_DDL

        def reader(self, schema: StructType) -> DataSourceReader:
            return WideBatchReader(_raw(parse_options(dict(self.options), batch=True)), plan)

        def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802 (PySpark's API)
            return WideStreamReader(_raw(parse_options(dict(self.options)).for_stream()), plan)

    def _raw(options: SourceOptions) -> SourceOptions:
        if options.value_schema != "raw":
            raise ConfigError(f"{name} parses payloads by the catalog: option schema must stay raw")
        return options

    return WideDataSource


def register_wide_source(spark: SparkSession, name: str, plan: TransformPlan) -> str:
    """Register the group's source under ``name`` with ``spark``; returns the format name."""
    from widehouse.source.spark import register

    register(spark)  # the PYSPARK_PYTHON check, and ``pulsar`` for readers of the same topics
    spark.dataSource.register(wide_source(name, plan))
    return name

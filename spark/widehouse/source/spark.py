"""The PySpark data source ``pulsar``: thin adapters from Spark's API to the controller and reader.

Where each piece runs:

- ``PulsarDataSource.__init__`` validates the options (a Python worker the JVM starts; errors
  reach the caller as an ``AnalysisException`` naming the option);
- the stream reader's offset calls run in one long-lived Python process next to the driver JVM,
  which holds the :class:`~.controller.StreamController`;
- ``read`` runs on executors; it only needs the picklable task and :class:`~.options.ReadConfig`;
- the sink's ``write`` runs on executors too (:mod:`~.sink`); ``writer`` / ``streamWriter`` and the
  commits run in driver-side Python workers (``streamWriter`` again for every micro-batch).

Readers are created on executors too (Spark builds a reader there to call ``read``), so their
constructors only store options; all clients are created lazily.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import sys
import threading
import uuid
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from widehouse.errors import ConfigError, PulsarError
from widehouse.source.controller import BatchPlanner, StreamController, budget_of
from widehouse.source.decode import DECODE_ERROR, ValueDecoder
from widehouse.source.metrics import BatchLog, TopicBatchMetrics, batch_log
from widehouse.source.options import NO_LIMIT, ReadConfig, SourceOptions, parse_options
from widehouse.source.planning import ReadTask
from widehouse.source.reader import read_task
from widehouse.source.schema import SCHEMA_DDL
from widehouse.source.sink import SinkReport, WriteIdentity, topic_deduplication, write_batches
from widehouse.source.sink_options import SinkOptions, check_columns, parse_sink_options
from widehouse.spark.static_sources import planner_python

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

FORMAT = "pulsar"
log = logging.getLogger("widehouse.pulsar.source")


class PulsarInputPartition(InputPartition):
    """One Spark task: the slices it reads (plain data, pickled to the executor)."""

    def __init__(self, task: ReadTask) -> None:
        super().__init__(task.messages)
        self.task = task


class PulsarDataSource(DataSource):
    """``spark.readStream.format("pulsar")`` / ``spark.read.format("pulsar")``; see the options module."""

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        # reads and writes take different options: reader(), streamReader(), writer() and
        # streamWriter() each validate their own (errors name the option either way)

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        # only the decoding options matter here; reads and streams each check the rest
        # (``batch=True`` would refuse a stream's startAfter before the stream reader is made)
        decoder = _decoder(parse_options(dict(self.options)))
        return decoder.spark_ddl() if decoder is not None else SCHEMA_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        options = parse_options(dict(self.options), batch=True)
        decoder = _decoder(options)
        _check_schema(schema, decoder)
        return PulsarBatchReader(options, decoder)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802 (PySpark's API)
        options = parse_options(dict(self.options)).for_stream()
        decoder = _decoder(options)
        _check_schema(schema, decoder)
        return PulsarStreamReader(options, decoder)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return PulsarBatchWriter(_sink_options(self.options, schema, overwrite), uuid.uuid4().hex[:16])

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamArrowWriter:  # noqa: N802 (PySpark's API)
        return PulsarStreamWriter(_sink_options(self.options, schema, overwrite))


class PulsarBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions, decoder: ValueDecoder | None = None) -> None:
        self.options = options
        self.read_config: ReadConfig = options.read_config
        self.decoder = decoder

    def partitions(self) -> Sequence[InputPartition]:
        planner = BatchPlanner(self.options)
        try:
            return [PulsarInputPartition(task) for task in planner.plan()]
        finally:
            planner.close()

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, PulsarInputPartition):  # Spark's stand-in for "no partitions"
            return iter(())
        return _decoded(read_task(partition.task, self.read_config), self.decoder)


class PulsarStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions, decoder: ValueDecoder | None = None) -> None:
        self.options = options
        self.read_config: ReadConfig = options.read_config
        self.decoder = decoder
        self._controller: StreamController | None = None

    @property
    def controller(self) -> StreamController:
        if self._controller is None:
            self._controller = StreamController(self.options)
        return self._controller

    def initialOffset(self) -> dict[str, Any]:  # noqa: N802 (PySpark's API)
        return self.controller.initial_offset()

    def getDefaultReadLimit(self) -> ReadLimit:  # noqa: N802 (PySpark's API)
        limits = self.options.limits
        if limits.max_per_trigger is not None:
            return ReadMaxRows(limits.max_per_trigger)
        if limits.limited:  # per-topic caps only: a "limit" Spark passes back, so caps apply
            return ReadMaxRows(NO_LIMIT)
        return ReadAllAvailable()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:  # noqa: N802 (PySpark's API)
        if isinstance(limit, ReadMaxRows):
            budget = budget_of(limit.max_rows)
        elif isinstance(limit, ReadAllAvailable):
            budget = None
        else:
            raise ConfigError(f"the pulsar source supports row limits only, not {limit}")
        return self.controller.latest_offset(start, budget)

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802 (PySpark's API)
        self.controller.prepare_available_now()

    def reportLatestOffset(self) -> dict[str, Any] | None:  # noqa: N802 (PySpark's API)
        return self.controller.report_latest()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        return [PulsarInputPartition(task) for task in self.controller.plan(start, end)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, PulsarInputPartition):  # Spark's stand-in for "no partitions"
            return iter(())
        return _decoded(read_task(partition.task, self.read_config), self.decoder)

    def commit(self, end: dict[str, Any]) -> None:
        self.controller.commit(end)

    def stop(self) -> None:
        if self._controller is not None:
            self._controller.stop()
            self._controller = None


@dataclass
class PulsarCommitMessage(WriterCommitMessage):
    """What one write task sent (small: counts and topic names)."""

    report: SinkReport


class PulsarBatchWriter(DataSourceArrowWriter):
    """``df.write.format("pulsar")``: producer names from a per-write id (task retries deduplicated)."""

    def __init__(self, options: SinkOptions, run: str) -> None:
        self.options = options
        self.run = run

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PulsarCommitMessage:
        from pyspark import TaskContext

        context = TaskContext.get()
        partition = context.partitionId() if context is not None else 0
        identity = WriteIdentity(self.run, None, partition)
        return PulsarCommitMessage(write_batches(iterator, self.options, identity))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        _log_commit(f"write {self.run}", messages)


class PulsarStreamWriter(DataSourceStreamArrowWriter):
    """``writeStream.format("pulsar")``: exactly once per (query id, micro-batch, partition, row)."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PulsarCommitMessage:
        from pyspark import TaskContext

        context = TaskContext.get()
        if context is None:
            raise PulsarError("the pulsar stream sink runs only inside a Spark task")
        query = context.getLocalProperty("sql.streaming.queryId")
        batch = context.getLocalProperty("streaming.sql.batchId")
        if not query or batch is None:
            raise PulsarError(
                "the pulsar stream sink found no query id / batch id in the task (micro-batch "
                "triggers only; continuous processing is not supported)"
            )
        identity = WriteIdentity(query, int(batch), context.partitionId())
        return PulsarCommitMessage(write_batches(iterator, self.options, identity))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803 (PySpark's API)
        _log_commit(f"micro-batch {batchId}", messages)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803 (PySpark's API)
        # what was sent stays in Pulsar: the retried batch sends the same names and sequence ids
        log.warning("pulsar sink: micro-batch %s aborted; its replay is deduplicated by the broker", batchId)


def _sink_options(options: Any, schema: StructType, overwrite: bool) -> SinkOptions:
    if overwrite:
        raise ConfigError(
            "the pulsar sink appends to topics; use mode append (there is nothing to overwrite)"
        )
    parsed = parse_sink_options(dict(options))
    columns = check_columns([(f.name, f.dataType.simpleString()) for f in schema.fields], parsed)
    parsed = dataclasses.replace(parsed, columns=columns)
    if parsed.require_exactly_once and parsed.topic is not None:
        status = topic_deduplication(parsed, parsed.topic)
        if not status.enabled:
            raise ConfigError(f"requireExactlyOnce=true refuses to write: {status.advice()}")
    return parsed


def _log_commit(what: str, messages: Sequence[WriterCommitMessage | None]) -> None:
    reports = [m.report for m in messages if isinstance(m, PulsarCommitMessage)]
    rows = sum(r.rows for r in reports)
    skipped = sum(r.skipped for r in reports)
    weak = sorted({t for r in reports for t in r.at_least_once})
    log.info("pulsar sink: %s wrote %d rows (%d already there from an earlier attempt)", what, rows, skipped)
    if weak:
        log.warning(
            "pulsar sink: %s was at-least-once for %s (no broker deduplication)", what, ", ".join(weak)
        )


def _check_schema(schema: StructType, decoder: ValueDecoder | None = None) -> None:
    names = [f.name for f in schema.fields]
    from widehouse.source.schema import COLUMNS

    expected: tuple[str, ...] = COLUMNS
    if decoder is not None:
        expected = (*(f.name for f in decoder.fields()), *COLUMNS, DECODE_ERROR)
    if tuple(names) != expected:
        raise ConfigError(
            f"the pulsar source has a fixed schema ({', '.join(expected)}); do not pass .schema(...)"
        )


def _decoder(options: SourceOptions) -> ValueDecoder | None:
    """With ``schema=registry``: the decoder of the topics' registered schema (asked once here)."""
    if options.value_schema != "registry":
        return None
    from widehouse.pulsar.admin import PulsarAdmin
    from widehouse.pulsar.schemas import registered_schema

    with PulsarAdmin(options.pulsar) as admin:
        schemas = {topic: registered_schema(admin, topic) for topic in options.selector.topics}
    return ValueDecoder.of(schemas)


def _decoded(batches: Iterator[pa.RecordBatch], decoder: ValueDecoder | None) -> Iterator[pa.RecordBatch]:
    if decoder is None:
        return batches
    return (decoder.decode(batch) for batch in batches)


_REGISTERED: weakref.WeakSet[Any] = weakref.WeakSet()
"""Sessions :func:`register` has registered the ``pulsar`` format with (while they live)."""
_REGISTERING = threading.Lock()


def register(spark: SparkSession) -> None:
    """Register the ``pulsar`` format with ``spark``, once per session.

    Spark starts the data source's planner and stream reader processes with the driver JVM's
    ``PYSPARK_PYTHON`` (not the ``spark.pyspark.python`` setting); without it they run ``python3``
    from PATH, which may lack pyarrow and pulsar-client. That is worth a warning here.

    A stream app registers its groups' sources side by side, each with this call: Spark warned
    "The data source pulsar replaced a previously registered data source" for every group after
    the first, and the ``PYSPARK_PYTHON`` warning came once per group.
    """
    with _REGISTERING:  # the groups of an app start side by side, each from a thread
        if spark in _REGISTERED:
            return
        spark.dataSource.register(PulsarDataSource)
        with contextlib.suppress(TypeError):  # a session that takes no weak reference registers each time
            _REGISTERED.add(spark)
    python = planner_python(spark)
    if python == "":  # None: Spark Connect has no JVM handle, nothing to check
        log.warning(
            "PYSPARK_PYTHON is not set in the Spark driver's environment: the pulsar source's "
            "planner and stream reader will run `python3` from PATH; set PYSPARK_PYTHON=%s before "
            "the session starts",
            sys.executable,
        )


# -- the offset log, read through the cluster's file system -----------------------------------
def read_text(spark: SparkSession, path: str) -> str:
    """A small text file through Hadoop's file system (local, HDFS, S3 ... as the cluster has)."""
    from widehouse.spark.hadoop_files import HadoopFiles

    text = HadoopFiles.of(spark).read(path)
    if text is None:
        raise FileNotFoundError(path)
    return text


def read_batch_log(
    spark: SparkSession, checkpoint_location: str, batch_id: int, app_id: str | None = None
) -> BatchLog:
    """Per-topic metrics and planning time of micro-batch ``batch_id``, from one read of its log."""
    path = f"{checkpoint_location.rstrip('/')}/offsets/{batch_id}"
    try:
        text = read_text(spark, path)
    except Exception as exc:  # py4j wraps the JVM's FileNotFoundException
        raise PulsarError(f"cannot read the offset log {path}: {exc}") from exc
    return batch_log(text, app_id)


def batch_metrics(
    spark: SparkSession, checkpoint_location: str, batch_id: int, app_id: str | None = None
) -> list[TopicBatchMetrics]:
    """Rows and lag per topic of micro-batch ``batch_id`` of the query checkpointed there."""
    return read_batch_log(spark, checkpoint_location, batch_id, app_id).metrics

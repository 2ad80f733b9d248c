"""The Spark half of the HBase day table: family ``h`` from a DataFrame, and the parallel extract.

Both run one Spark task per salt bucket, and each task opens its own Thrift connection
(:func:`widehouse.hbase.connect` inside the task; only plain settings and the
:class:`~widehouse.hbase.daytable.DayTable` description are shipped):

- :func:`write_offline_family`: the offline frame's rows, salted and hash-partitioned by bucket in
  Spark (all rows of a bucket in one task), reach the tasks as Arrow batches (``mapInArrow``: no
  Python rows); each task puts them in bounded chunks (packed cells, bounded Thrift batches:
  :mod:`.day`) and prunes the rows of its buckets that the new data lacks; the driver prunes the
  buckets that got no row. Timestamps travel as
  epoch ms, so no time zone is involved.
- :func:`extract_day`: task i scans the prefix ``<i>|<yyyymmdd>|`` and returns its rows as Arrow IPC
  blobs of at most :data:`~widehouse.hbase.day.CHUNK_ROWS` rows; the driver reads them as a stream
  (``toLocalIterator``, the next bucket's task running while one is consumed), so it holds a few
  chunks, not the day. Failures name the Thrift server.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from widehouse.catalog.schema import OFFLINE_FAMILY
from widehouse.errors import HBaseError
from widehouse.hbase.day import FamilyWrite, FamilyWriter, decode_rows, scan_bucket_chunks, thrift_failure

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from widehouse.hbase.daytable import DayTable
    from widehouse.settings import HBaseSettings

_TASK_ERROR = re.compile(r"widehouse\.errors\.HBaseError: (.*)")


def _write_buckets(
    settings: HBaseSettings, spec: DayTable, day: dt.date, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """A task of :func:`write_offline_family`: its rows (Arrow batches ordered by ``_bucket``, every
    row of a bucket in this task) -> family ``h``; each bucket pruned once its rows are put."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from thriftpy2.thrift import TException

    from widehouse.hbase.connection import connect

    done: list[tuple[int, int, int]] = []  # (bucket, rows, pruned)
    connection = connect(settings)
    current: int | None = None
    try:
        writer = FamilyWriter(connection.table(spec.name), spec, OFFLINE_FAMILY, day)
        before = (0, 0)

        def finish(bucket: int) -> None:
            nonlocal before
            writer.finish_bucket(bucket)
            done.append((bucket, writer.rows - before[0], writer.pruned - before[1]))
            before = (writer.rows, writer.pruned)

        for batch in batches:
            rows = pa.Table.from_batches([batch])
            column = rows["_bucket"]
            for bucket in pc.unique(column).to_pylist():
                if current is not None and bucket != current:
                    finish(current)
                current = bucket
                writer.put(rows.filter(pc.equal(column, bucket)))
        if current is not None:
            finish(current)
    except (TException, OSError) as exc:
        raise thrift_failure(
            settings, f"writing family h of {spec.name} bucket {current} for {day}", exc
        ) from exc
    finally:
        connection.close()
    schema = pa.schema([("bucket", pa.int32()), ("rows", pa.int64()), ("pruned", pa.int64())])
    yield pa.RecordBatch.from_pylist([dict(zip(schema.names, d, strict=True)) for d in done], schema=schema)


def write_offline_family(
    settings: HBaseSettings, spec: DayTable, frame: DataFrame, day: dt.date
) -> FamilyWrite:
    """Family ``h`` of the day := ``frame`` (key + every offline column, one row per key).

    Spark computes each row's salt bucket (``crc32`` of the key text, as
    :func:`~widehouse.hbase.keys.salt_of`), hash-partitions the rows by bucket into ``buckets``
    tasks (a bucket's rows all in one task; no sampling pass, so the Hive SQL runs once) and hands
    each task Arrow batches sorted by bucket (:func:`_write_buckets`); the driver then prunes the
    buckets no row fell in.
    """
    from pyspark.sql import functions as sf
    from thriftpy2.thrift import TException

    from widehouse.hbase.connection import connect

    columns = [sf.col(spec.key_name)]
    columns += [
        sf.unix_millis(sf.col(c)).alias(c) if kind == "timestamp-ms" else sf.col(c)
        for c, kind in spec.offline
    ]
    salt = sf.crc32(sf.col(spec.key_name).cast("string")) % sf.lit(spec.buckets)
    rows = (
        frame.select(*columns, salt.cast("int").alias("_bucket"))
        .repartition(spec.buckets, "_bucket")
        .sortWithinPartitions("_bucket")
    )
    task = functools.partial(_write_buckets, settings, spec, day)
    try:
        counts = rows.mapInArrow(task, "bucket int, rows long, pruned long").collect()
    except Exception as exc:  # Py4J/PythonException wrap the task's error: name the server
        raise task_failure(settings, f"writing family h of {spec.name} for {day}", exc) from exc
    seen = {c["bucket"] for c in counts}
    pruned = sum(c["pruned"] for c in counts)
    empty = [b for b in range(spec.buckets) if b not in seen]
    if empty:  # buckets without a row today: their rows of the day lose family h
        connection = connect(settings)
        try:
            writer = FamilyWriter(connection.table(spec.name), spec, OFFLINE_FAMILY, day)
            pruned += sum(writer.finish_bucket(b) for b in empty)
        except (TException, OSError) as exc:
            raise thrift_failure(settings, f"pruning family h of {spec.name} for {day}", exc) from exc
        finally:
            connection.close()
    return FamilyWrite(sum(c["rows"] for c in counts), pruned)


def _scan_buckets(
    settings: HBaseSettings, spec: DayTable, day: dt.date, buckets: Iterator[int]
) -> Iterator[bytes]:
    import pyarrow as pa
    from thriftpy2.thrift import TException

    from widehouse.hbase.connection import connect

    connection = connect(settings)
    try:
        hbase_table = connection.table(spec.name)
        for bucket in buckets:
            try:
                for rows in scan_bucket_chunks(hbase_table, spec, day, bucket):
                    sink = pa.BufferOutputStream()
                    with pa.ipc.new_stream(sink, rows.schema) as writer:
                        writer.write_table(rows)
                    yield sink.getvalue().to_pybytes()
            except (TException, OSError) as exc:
                raise thrift_failure(
                    settings, f"scanning {spec.name} bucket {bucket} for {day}", exc
                ) from exc
    finally:
        connection.close()


def extract_day(
    spark: SparkSession, settings: HBaseSettings, spec: DayTable, day: dt.date
) -> pa.RecordBatchReader:
    """The day's rows of the day table, one Spark task per salt bucket, as a stream of record
    batches in bucket order (read it once; a failed task raises HBaseError while it is read)."""
    import pyarrow as pa

    task = functools.partial(_scan_buckets, settings, spec, day)
    rdd = spark.sparkContext.parallelize(range(spec.buckets), spec.buckets).mapPartitions(task)
    doing = f"extracting {spec.name} for {day}"

    def batches() -> Iterator[pa.RecordBatch]:
        try:
            blobs = rdd.toLocalIterator(prefetchPartitions=True)
            for blob in blobs:
                yield from pa.ipc.open_stream(blob).read_all().to_batches()
        except HBaseError:
            raise
        except Exception as exc:  # Py4J/PythonException wrap the task's error: name the server
            raise task_failure(settings, doing, exc) from exc

    return pa.RecordBatchReader.from_batches(decode_rows(spec, day, []).schema, batches())


def task_failure(settings: HBaseSettings, doing: str, exc: BaseException) -> HBaseError:
    """One clear error for failed Spark tasks: the tasks' own HBaseError when there is one."""
    text = str(exc)
    found = _TASK_ERROR.search(text)
    if found:
        return HBaseError(f"{doing} failed: {found.group(1).strip()}")
    first = next((line for line in text.splitlines() if line.strip()), type(exc).__name__)
    return HBaseError(
        f"{doing} failed (Spark tasks on the HBase Thrift server at {settings.host}:{settings.port}): {first}"
    )

"""The Spark half of the HBase day table: family ``h`` from a DataFrame, and the parallel extract.

Both run one Spark task per salt bucket, and each task opens its own Thrift connection
(:func:`widehouse.hbase.connect` inside the task; only plain settings and the
:class:`~widehouse.hbase.daytable.DayTable` description are shipped):

- :func:`write_offline_family`: the offline frame's rows go to the task of their bucket (an RDD
  partitioned by salt, partition i = bucket i, so a bucket with no rows still gets its task); each
  task puts its rows and prunes rows of its bucket that the new data lacks. Timestamps travel as
  epoch ms, so no time zone is involved.
- :func:`extract_day`: task i scans the prefix ``<i>|<yyyymmdd>|`` and returns its rows as one Arrow
  IPC stream; the driver concatenates them (sorted by key). Failures name the Thrift server.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from widehouse.catalog.schema import OFFLINE_FAMILY
from widehouse.errors import HBaseError
from widehouse.hbase.day import FamilyWrite, scan_bucket, thrift_failure, write_family
from widehouse.hbase.keys import salt_of

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from widehouse.hbase.daytable import DayTable
    from widehouse.settings import HBaseSettings

_TASK_ERROR = re.compile(r"widehouse\.errors\.HBaseError: (.*)")


def _write_bucket(
    settings: HBaseSettings,
    spec: DayTable,
    day: dt.date,
    bucket: int,
    items: Iterator[tuple[int, tuple[Any, ...]]],
) -> Iterator[tuple[int, int]]:
    import pyarrow as pa
    from thriftpy2.thrift import TException

    from widehouse.hbase.codec import arrow_type
    from widehouse.hbase.connection import connect

    rows = [values for _, values in items]
    key_type = pa.int64() if spec.key_type == "long" else pa.string()
    fields = [pa.field(spec.key_name, key_type)]
    fields += [
        pa.field(c, pa.int64() if kind == "timestamp-ms" else arrow_type(kind)) for c, kind in spec.offline
    ]
    schema = pa.schema(fields)  # timestamps arrive as epoch ms
    data = pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in rows], schema=schema)
    connection = connect(settings)
    try:
        done = write_family(connection.table(spec.name), spec, OFFLINE_FAMILY, day, data, [bucket])
    except (TException, OSError) as exc:
        raise thrift_failure(
            settings, f"writing family h of {spec.name} bucket {bucket} for {day}", exc
        ) from exc
    finally:
        connection.close()
    yield done.rows, done.pruned


def write_offline_family(
    settings: HBaseSettings, spec: DayTable, frame: DataFrame, day: dt.date
) -> FamilyWrite:
    """Family ``h`` of the day := ``frame`` (key + every offline column, one row per key)."""
    from pyspark.sql import functions as sf

    columns = [sf.col(spec.key_name)]
    columns += [
        sf.unix_millis(sf.col(c)).alias(c) if kind == "timestamp-ms" else sf.col(c)
        for c, kind in spec.offline
    ]
    buckets = spec.buckets
    rdd = (
        frame.select(*columns)
        .rdd.map(lambda row: (salt_of(row[0], buckets), tuple(row)))
        .partitionBy(buckets, lambda bucket: bucket)
    )
    task = functools.partial(_write_bucket, settings, spec, day)
    try:
        counts = rdd.mapPartitionsWithIndex(task).collect()
    except Exception as exc:  # Py4J/PythonException wrap the task's error: name the server
        raise task_failure(settings, f"writing family h of {spec.name} for {day}", exc) from exc
    return FamilyWrite(sum(c[0] for c in counts), sum(c[1] for c in counts))


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
                rows = scan_bucket(hbase_table, spec, day, bucket)
            except (TException, OSError) as exc:
                raise thrift_failure(
                    settings, f"scanning {spec.name} bucket {bucket} for {day}", exc
                ) from exc
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, rows.schema) as writer:
                writer.write_table(rows)
            yield sink.getvalue().to_pybytes()
    finally:
        connection.close()


def extract_day(spark: SparkSession, settings: HBaseSettings, spec: DayTable, day: dt.date) -> pa.Table:
    """The day's rows of the day table, one Spark task per salt bucket, sorted by key."""
    import pyarrow as pa

    task = functools.partial(_scan_buckets, settings, spec, day)
    rdd = spark.sparkContext.parallelize(range(spec.buckets), spec.buckets)
    try:
        blobs = rdd.mapPartitions(task).collect()
    except Exception as exc:  # Py4J/PythonException wrap the task's error: name the server
        raise task_failure(settings, f"extracting {spec.name} for {day}", exc) from exc
    tables = [pa.ipc.open_stream(blob).read_all() for blob in blobs]
    return pa.concat_tables(tables).sort_by(spec.key_name)


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

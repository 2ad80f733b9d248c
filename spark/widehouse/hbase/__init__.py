"""HBase through its Thrift (v1) server: connections and the day tables of the daily merge.

- :mod:`.connection`: :func:`connect`, a happybase connection (one per task; never shipped).
- :mod:`.keys`: salted row keys ``<salt>|<yyyymmdd>|<key>`` and the salt buckets' split keys.
- :mod:`.codec`: how one value is written (typed text) and read back into Arrow.
- :mod:`.packed`: a family of a day row as one cell (format 1: header, null bitmap, offsets, the
  values' text), encoded and decoded vectorised; ``widehouse hbase get`` prints a decoded row.
- :mod:`.daytable`: a wide table's HBase day table (name, families, columns) and its creation,
  pre-split on the salt buckets (:mod:`.presplit`).
- :mod:`.day`: writing a family for a day (absolute puts of packed cells in bounded chunks and
  batches, pruning bucket by bucket) and scanning a salt bucket back.
- :mod:`.refresh`: :func:`~widehouse.hbase.refresh.refresh_stream_family` (ClickHouse -> family
  ``s``, streamed), skipped when a fingerprint of the day's partials matches the last refresh's.
- :mod:`.spark`: the Spark half (offline family ``h`` from Hive, the parallel extract).
"""

from widehouse.hbase.connection import connect

__all__ = ["connect"]

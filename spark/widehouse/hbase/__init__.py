"""HBase through its Thrift (v1) server: connections and the day tables of the daily merge.

- :mod:`.connection`: :func:`connect`, a happybase connection (one per task; never shipped).
- :mod:`.keys`: salted row keys ``<salt>|<yyyymmdd>|<key>`` and the salt buckets' split keys.
- :mod:`.codec`: how values are stored (typed text) and read back into Arrow.
- :mod:`.daytable`: a wide table's HBase day table (name, families, columns) and its creation,
  pre-split on the salt buckets (:mod:`.presplit`).
- :mod:`.day`: writing a family for a day (absolute puts, deletes of what became null) and scanning
  a salt bucket back; :func:`~widehouse.hbase.day.refresh_stream_family` (ClickHouse -> family ``s``).
- :mod:`.spark`: the Spark half (offline family ``h`` from Hive, the parallel extract).
"""

from widehouse.hbase.connection import connect

__all__ = ["connect"]

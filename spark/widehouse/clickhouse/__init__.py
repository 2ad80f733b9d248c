"""ClickHouse: the one client type Widehouse talks to (:class:`ClickHouse`), all of its DDL
(:mod:`widehouse.clickhouse.ddl`), idempotent inserts, drops and read-back.
"""

from widehouse.clickhouse.client import ClickHouse, Driver, connect, database_name, embedded_path

__all__ = ["ClickHouse", "Driver", "connect", "database_name", "embedded_path"]

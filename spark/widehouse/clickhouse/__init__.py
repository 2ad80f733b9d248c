"""ClickHouse: the one client type Widehouse talks to, its DDL, idempotent inserts and read-back.

- :mod:`widehouse.clickhouse.client` connects (a server URL, or the local service by default).
"""

from widehouse.clickhouse.client import connect, database_name, embedded_path

__all__ = ["connect", "database_name", "embedded_path"]

"""A local ClickHouse server: the chDB engine behind ClickHouse's HTTP interface, on loopback.

chDB hosts the real ClickHouse engine in a process, one process per data directory. This service is
that one process: streaming apps, batch jobs, the CLI and tests reach the shared warehouse through
the HTTP interface clickhouse-connect speaks (``http://user:password@127.0.0.1:PORT``).

- :mod:`.config`: :class:`ServerConfig` (loopback only);
- :mod:`.engine`: the pool of chDB handles, each brought to a request's settings and database;
- :mod:`.protocol`, :mod:`.codec`, :mod:`.sql`: parameters, credentials, errors, bodies, routing;
- :mod:`.guard`: what a request may run (nothing that reaches the host; ``GET`` is read-only);
- :mod:`.sessions`: ``session_id`` state; :mod:`.executor`: one request; :mod:`.http`: the server.

Safe by default: a password is required, every request is authenticated before its body is read,
every read and each query's time and memory are bounded, and so are connections and the wait for an
engine handle (see :class:`ServerConfig`).

Run it with ``python -m widehouse.clickhouse.server --data-dir DIR --port P`` (see ``__main__``).
"""

from widehouse.clickhouse.server.config import PASSWORD_ENV, ServerConfig

__all__ = ["PASSWORD_ENV", "ServerConfig"]

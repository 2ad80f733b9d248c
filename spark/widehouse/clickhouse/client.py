"""ClickHouse clients: the embedded chDB engine by default, a ClickHouse server when a URL is set.

Both are clickhouse-connect clients with the same API (``command``, ``query``, ``query_arrow``,
``insert_arrow``), so no other module needs to know which one it talks to.

The embedded engine has two rules of its own (chDB's, not ours): one process holds a data path at
a time, and one process can open only one data path. :func:`connect` turns a violation of either
into a :class:`ClickHouseError` that says so.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from widehouse.errors import ClickHouseError
from widehouse.settings import ClickHouseSettings

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def embedded_path(dsn: str) -> str | None:
    """The data directory of a ``chdb://`` DSN, or None for an in-memory engine."""
    parts = urlsplit(dsn)
    location = parts.path if not parts.netloc else parts.netloc
    if location in ("", "memory", ":memory:"):
        return None
    return unquote(location)


def _dsn_database(dsn: str) -> str | None:
    parts = urlsplit(dsn)
    if parts.scheme == "chdb":
        if parts.netloc:  # chdb://memory/db
            return unquote(parts.path.lstrip("/").split("/")[0]) or None
        return None
    return unquote(parts.path.lstrip("/").split("/")[0]) or None


def database_name(settings: ClickHouseSettings) -> str:
    """The database Widehouse uses: the one in the DSN path, else the configured one."""
    name = _dsn_database(settings.dsn) or settings.database
    if not _IDENT.match(name):
        raise ClickHouseError(f"ClickHouse database name {name!r} is not a plain identifier")
    return name


def connect(settings: ClickHouseSettings, create_database: bool = True, **client_kwargs: Any) -> Any:
    """A clickhouse-connect client for ``settings``, with the Widehouse database selected.

    ``client_kwargs`` go to ``clickhouse_connect.get_client`` (e.g. ``settings=``, ``send_receive_timeout``).
    """
    import clickhouse_connect
    from clickhouse_connect.driver.exceptions import ClickHouseError as DriverError

    database = database_name(settings)
    try:
        if settings.embedded:
            path = embedded_path(settings.dsn)
            if path is not None:
                Path(path).mkdir(parents=True, exist_ok=True)
            client = clickhouse_connect.get_client(interface="chdb", path=path or ":memory:", **client_kwargs)
        else:
            client = clickhouse_connect.get_client(dsn=_server_dsn(settings.dsn), **client_kwargs)
        if create_database:
            client.command(f"CREATE DATABASE IF NOT EXISTS `{database}`")
        client.database = database
    except DriverError as exc:
        raise ClickHouseError(_explain(settings, exc)) from exc
    except OSError as exc:
        raise ClickHouseError(f"cannot reach ClickHouse at {settings.display_dsn}: {exc}") from exc
    return client


def _server_dsn(dsn: str) -> str:
    """Drop the database from the path: it is selected after it is created."""
    parts = urlsplit(dsn)
    return parts._replace(path="").geturl()


def _explain(settings: ClickHouseSettings, exc: Exception) -> str:
    text = str(exc)
    if settings.embedded and ("EmbeddedServer" in text or "Unable to open the chdb engine" in text):
        return (
            f"the embedded ClickHouse at {settings.display_dsn} is held by another process, or this "
            "process already opened a different chDB path (chDB allows one data path per process and "
            "one process per data path). Stop the other process or use a ClickHouse server "
            f"(WIDEHOUSE_CLICKHOUSE_DSN=http://...). Cause: {text}"
        )
    return f"ClickHouse at {settings.display_dsn} failed: {text}"

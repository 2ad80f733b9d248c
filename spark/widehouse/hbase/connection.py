"""HBase connections through the Thrift (v1) server, with happybase.

Connections are cheap and not thread-safe: create one per task / partition (inside
``foreachPartition`` on executors), never ship one from the driver.
"""

from __future__ import annotations

from typing import Any

from widehouse.errors import HBaseError
from widehouse.settings import HBaseSettings


def connect(settings: HBaseSettings, **kwargs: Any) -> Any:
    """An open ``happybase.Connection`` to the configured Thrift server."""
    import happybase
    from thriftpy2.transport import TTransportException

    connection = happybase.Connection(
        settings.host, settings.port, timeout=settings.timeout_ms, autoconnect=False, **kwargs
    )
    try:
        connection.open()
    except (TTransportException, OSError) as exc:
        raise HBaseError(
            f"cannot reach the HBase Thrift server at {settings.host}:{settings.port}: {exc}. "
            "Is it running (`widehouse services status`)?"
        ) from exc
    return connection

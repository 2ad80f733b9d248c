"""Local services on loopback: Pulsar standalone, HBase standalone and its Thrift server, the local
ClickHouse service and the shared Hive metastore.

Use :class:`ServiceManager` (``widehouse services up|down|status``); each service is a
:class:`LocalService` over the generic :class:`ManagedProcess` mechanism.
"""

from __future__ import annotations

from widehouse.services.base import LocalService
from widehouse.services.manager import ServiceManager, ServiceStatus
from widehouse.services.process import ManagedProcess, PortSpec, ProcessSpec

__all__ = ["LocalService", "ManagedProcess", "PortSpec", "ProcessSpec", "ServiceManager", "ServiceStatus"]

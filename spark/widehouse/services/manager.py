"""Bring the local services up, down, and report their status.

``up`` starts what is not running (independent services in parallel, dependants after the services
they need are healthy) and waits for real health; running healthy services are left alone, so
``up`` twice is harmless; it also creates (or tightens) the state dir and every service's directory
as 0700. ``down`` stops in reverse order and also finds processes whose pid file
was lost. Failures name the service and show the tail of its log.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from widehouse import private
from widehouse.errors import ConfigError, ServiceError
from widehouse.services.base import LocalService
from widehouse.services.clickhouse import ClickHouseService
from widehouse.services.hbase import HBaseStandalone, HBaseThrift
from widehouse.services.metastore import HiveMetastore
from widehouse.services.process import ManagedProcess, tail
from widehouse.services.pulsar import PulsarStandalone
from widehouse.services.spark_cluster import SparkMaster, SparkWorkers
from widehouse.settings import LocalServicesSettings

SERVICE_CLASSES: tuple[type[LocalService], ...] = (
    PulsarStandalone,
    HBaseStandalone,
    HBaseThrift,
    ClickHouseService,
    HiveMetastore,
    SparkMaster,
    SparkWorkers,
)

SERVICE_GROUPS: dict[str, tuple[str, ...]] = {"spark": ("spark-master", "spark-worker")}
"""Names that stand for several services (``widehouse services up spark``)."""

Reporter = Callable[[str], None]


@dataclass(frozen=True)
class ServiceStatus:
    name: str
    state: str
    """running (healthy), unhealthy, or stopped"""
    pid: int | None
    detail: str
    endpoints: tuple[str, ...]
    log_file: str


class ServiceManager:
    def __init__(
        self,
        local: LocalServicesSettings,
        services: Iterable[LocalService] | None = None,
        report: Reporter | None = None,
    ) -> None:
        self.local = local
        self.services: dict[str, LocalService] = {
            s.name: s for s in (services if services is not None else (c(local) for c in SERVICE_CLASSES))
        }
        self.report: Reporter = report or (lambda _msg: None)

    # -- selection ---------------------------------------------------------------------------
    def select(
        self, names: Iterable[str] | None, with_dependencies: bool, optional: bool = False
    ) -> list[LocalService]:
        """Services in start order; ``names`` None means all but the optional ones (all with
        ``optional``). Unknown names are a ConfigError."""
        if names:
            wanted = [n for name in names for n in SERVICE_GROUPS.get(name, (name,))]
        else:
            wanted = [n for n, s in self.services.items() if optional or not s.optional]
        unknown = [n for n in wanted if n not in self.services]
        if unknown:
            raise ConfigError(f"unknown service {', '.join(unknown)!s}; known: {', '.join(self.services)}")
        chosen: set[str] = set()

        def add(name: str) -> None:
            if name in chosen:
                return
            if with_dependencies:
                for dep in self.services[name].depends_on:
                    if dep in self.services:  # a manager of a subset (up_missing): the rest answers
                        add(dep)
            chosen.add(name)

        for name in wanted:
            add(name)
        return [s for s in self._ordered() if s.name in chosen]

    def _ordered(self) -> list[LocalService]:
        ordered: list[LocalService] = []
        seen: set[str] = set()

        def visit(service: LocalService) -> None:
            if service.name in seen:
                return
            seen.add(service.name)
            for dep in service.depends_on:
                if dep in self.services:
                    visit(self.services[dep])
            ordered.append(service)

        for service in self.services.values():
            visit(service)
        return ordered

    # -- up ----------------------------------------------------------------------------------
    def up(self, names: Iterable[str] | None = None) -> list[str]:
        """Start what is not running and wait until everything selected is healthy.

        Returns the names this call started (empty when everything was already up).
        """
        started: list[str] = []
        pending = self.select(names, with_dependencies=True)
        t0 = time.monotonic()
        private.private_dir(self.local.state_dir, tighten=True)  # data, logs, secrets: this user's only
        for service in pending:
            private.private_dir(service.dir.parent, tighten=True)
            private.private_dir(service.dir, tighten=True)
        while pending:
            # launch every service whose dependencies are healthy, then wait for that wave
            wave = [s for s in pending if all(d not in {p.name for p in pending} for d in s.depends_on)]
            launched: list[tuple[LocalService, ManagedProcess, float]] = []
            for service in wave:
                if service.process.pid() is not None:
                    self.report(f"{service.name}: already running (pid {service.process.pid()})")
                    launched.append((service, service.process, time.monotonic()))
                    continue
                self._clear_strays(service)
                self.report(f"{service.name}: starting ({', '.join(service.endpoints())})")
                launched.append((service, service.start(), time.monotonic()))
                started.append(service.name)
            failures: list[str] = []
            for service, process, since in launched:
                try:
                    process.wait_healthy(service.probe, timeout=self.local.start_timeout)
                except ServiceError as exc:
                    failures.append(str(exc))
                    continue
                self.report(f"{service.name}: healthy after {time.monotonic() - since:.1f}s")
            if failures:
                # leave nothing half-started behind
                for name in reversed(started):
                    self.services[name].process.stop()
                raise ServiceError("\n\n".join(failures))
            pending = [s for s in pending if s not in wave]
        self.report(f"all selected services healthy in {time.monotonic() - t0:.1f}s")
        return started

    def up_missing(self, names: Iterable[str] | None = None) -> list[str]:
        """Like :meth:`up`, but leave alone the selected services that already answer on their ports,
        whoever started them (the developer's services of another state dir, a shared set on a box).

        For callers that only need the services to be reachable (the demo, the test session); ``up``
        itself refuses a port another state dir's service holds. Returns the names this call started.
        """
        missing = [s for s in self.select(names, with_dependencies=True) if _probe(s) is not None]
        if not missing:
            return []
        return ServiceManager(self.local, missing, self.report).up()

    def _clear_strays(self, service: LocalService) -> None:
        strays = service.process.stray_pids()
        if strays:
            self.report(f"{service.name}: stopping leftover processes {strays}")
            service.process.stop()

    # -- down --------------------------------------------------------------------------------
    def down(self, names: Iterable[str] | None = None) -> list[str]:
        """Stop the selected services (dependants first). Returns the names that were running.

        ``names`` None stops every service; an empty selection stops none: it is what
        :meth:`up_missing` returns when every service already answered, and a caller that stops
        what it started must not stop all of them then (the test session's metastore was)."""
        if names is not None:
            names = list(names)
            if not names:
                return []
        stopped: list[str] = []
        chosen = {s.name for s in self.select(names, with_dependencies=False, optional=True)}
        # stopping a service also stops what depends on it
        for service in self._ordered():
            if any(dep in chosen for dep in service.depends_on):
                chosen.add(service.name)
        for service in reversed(self._ordered()):
            if service.name not in chosen:
                continue
            if service.process.stop():
                self.report(f"{service.name}: stopped")
                stopped.append(service.name)
            else:
                self.report(f"{service.name}: was not running")
        return stopped

    # -- status ------------------------------------------------------------------------------
    def status(self, names: Iterable[str] | None = None) -> list[ServiceStatus]:
        result: list[ServiceStatus] = []
        for service in self.select(names, with_dependencies=False):
            pid = service.process.pid()
            if pid is None:
                state, detail = "stopped", ""
            else:
                reason = _probe(service)
                state, detail = ("running", "healthy") if reason is None else ("unhealthy", reason)
            result.append(
                ServiceStatus(
                    name=service.name,
                    state=state,
                    pid=pid,
                    detail=detail,
                    endpoints=tuple(service.endpoints()),
                    log_file=str(service.log_file),
                )
            )
        return result

    def healthy(self, names: Iterable[str] | None = None) -> bool:
        return all(s.state == "running" for s in self.status(names))

    def answering(self, names: Iterable[str] | None = None) -> bool:
        """Whether every selected service answers its health probe, whoever started it (e.g. the
        services of another state dir on the same ports)."""
        return all(_probe(s) is None for s in self.select(names, with_dependencies=False))

    def log_tail(self, name: str, lines: int = 40) -> str:
        return tail(self.services[name].log_file, lines)


def _probe(service: LocalService) -> str | None:
    try:
        return service.probe()
    except Exception as exc:  # status must report, not crash
        return f"{type(exc).__name__}: {exc}"

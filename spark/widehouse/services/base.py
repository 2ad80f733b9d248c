"""What every local service has in common: a directory, a process, a probe."""

from __future__ import annotations

import re
import shutil
import subprocess
from abc import ABC, abstractmethod
from functools import cache
from pathlib import Path

from widehouse.errors import SetupError
from widehouse.services.process import ManagedProcess, PortSpec, ProcessSpec
from widehouse.settings import LocalServicesSettings


class LocalService(ABC):
    """One service `widehouse services` runs on loopback from the jars `make setup` resolved."""

    name: str
    depends_on: tuple[str, ...] = ()
    optional: bool = False
    """Started only when named (``widehouse services up spark``), never by a plain ``up``."""

    def __init__(self, local: LocalServicesSettings) -> None:
        self.local = local
        self.process = ManagedProcess(self._spec(argv=()))

    # -- layout ------------------------------------------------------------------------------
    @property
    def dir(self) -> Path:
        """This service's own working directory under the state dir (data, conf, logs, pid)."""
        return self.local.state_dir / "services" / self.name

    @property
    def log_file(self) -> Path:
        return self.dir / "logs" / f"{self.name}.log"

    @property
    def marker(self) -> str:
        return f"-Dwidehouse.service={self.name}@{self.local.state_dir}"

    def _spec(self, argv: tuple[str, ...]) -> ProcessSpec:
        return ProcessSpec(
            name=self.name,
            argv=argv,
            cwd=self.dir,
            log_file=self.log_file,
            pid_file=self.dir / f"{self.name}.pid",
            marker=self.marker,
            env=self.environment(),
            ports=self.ports(),
        )

    # -- what each service defines -----------------------------------------------------------
    @abstractmethod
    def ports(self) -> tuple[PortSpec, ...]: ...

    @abstractmethod
    def command(self) -> tuple[str, ...]:
        """The argv that runs the service (raises SetupError when its jars are missing)."""

    @abstractmethod
    def probe(self) -> str | None:
        """None when the service answers real requests, else why not."""

    def prepare(self) -> None:  # noqa: B027 - optional hook
        """Write configuration files into :attr:`dir` before a start."""

    def environment(self) -> dict[str, str]:
        return {}

    def endpoints(self) -> list[str]:
        return [f"{p.label} {p.host}:{p.port}" for p in self.ports()]

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> ManagedProcess:
        """Prepare and launch; returns the process to wait on (health is checked by the manager)."""
        argv = self.command()
        self.prepare()
        self.process = ManagedProcess(self._spec(argv=argv))
        self.process.start()
        return self.process


def find_java(java_home: str | None, path: str | None = None) -> str | None:
    """``<java_home>/bin/java``, else the ``java`` on ``path`` (default: ``PATH``); None if absent."""
    candidate = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java", path=path)
    return candidate if candidate and Path(candidate).exists() else None


def java_bin(local: LocalServicesSettings) -> str:
    """The java executable for the local services (JDK 17 or newer)."""
    candidate = find_java(local.java_home)
    if candidate is None:
        raise SetupError(
            "no java found: install a JDK 17+ (Debian: apt-get install openjdk-17-jdk-headless) "
            "or set WIDEHOUSE_JAVA_HOME"
        )
    major = _java_major(candidate)
    if major is not None and major < 17:
        raise SetupError(
            f"{candidate} is Java {major}; the local services need Java 17 or newer (set WIDEHOUSE_JAVA_HOME)"
        )
    return candidate


@cache
def _java_major(java: str) -> int | None:
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not match:
        return None
    first = int(match.group(1))
    return int(match.group(2) or 0) if first == 1 else first


def require_dir(path: Path, what: str) -> Path:
    if not path.is_dir():
        raise SetupError(f"{what} not found at {path}; run `make setup` first")
    return path


JDK17_OPENS: tuple[str, ...] = (
    "-XX:+IgnoreUnrecognizedVMOptions",
    "--add-modules=jdk.unsupported",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
    "--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-exports=java.security.jgss/sun.security.krb5=ALL-UNNAMED",
    "--add-exports=java.base/sun.net.dns=ALL-UNNAMED",
    "--add-exports=java.base/sun.net.util=ALL-UNNAMED",
    "-Dorg.apache.hbase.thirdparty.io.netty.tryReflectionSetAccessible=true",
)
"""Module opens HBase 2.6 needs on JDK 17 (the same list its bin/hbase adds)."""

"""A Spark standalone cluster on loopback: one master and ``WIDEHOUSE_SPARK_WORKERS`` workers.

Both run from the installed pyspark's own launcher (``bin/spark-class
org.apache.spark.deploy.master.Master`` / ``...worker.Worker``), each worker in its own work dir
under the service directory. They are optional services: ``widehouse services up spark`` (the
group of ``spark-master`` and ``spark-worker``) starts them, a plain ``widehouse services up`` does
not.

The workers run in a scrubbed environment: no ``VIRTUAL_ENV``, no ``PYTHONPATH``, no
``PYSPARK_PYTHON`` and a ``PATH`` without the checkout's venv, so nothing an executor runs can come
from the driver's checkout by accident. Executors get their Python and Widehouse from the job
(``WIDEHOUSE_SPARK_ARCHIVE``: see :mod:`widehouse.spark.shipping`).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from widehouse.errors import SetupError
from widehouse.services.base import LocalService
from widehouse.services.process import PortSpec
from widehouse.settings import LocalServicesSettings

SCRUBBED = ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")
"""Variables removed from the workers' environment (they would point executors at the checkout)."""

WORKER_CLEANUP = {
    "spark.worker.cleanup.enabled": "true",
    "spark.worker.cleanup.interval": "600",
    "spark.worker.cleanup.appDataTtl": "3600",
}
"""The workers remove a finished application's work dir an hour after it ended (checked every ten
minutes; Spark's defaults: off, and a week)."""


def spark_home() -> Path:
    """The installed pyspark's directory: a Spark distribution (``bin/spark-class``, ``jars/``)."""
    spec = importlib.util.find_spec("pyspark")  # found, not imported: services stay pyspark-free
    if spec is None or spec.origin is None:
        raise SetupError("pyspark is not installed: run `make setup`")
    home = Path(spec.origin).parent
    if not (home / "bin" / "spark-class").is_file():
        raise SetupError(f"{home} has no bin/spark-class: a pip-installed pyspark 4 is expected")
    return home


def scrubbed_path() -> str:
    """``PATH`` without this interpreter's venv ``bin`` (and without ``VIRTUAL_ENV``'s)."""
    venv_bins = {str(Path(sys.prefix) / "bin"), str(Path(sys.executable).parent)}
    if os.environ.get("VIRTUAL_ENV"):
        venv_bins.add(str(Path(os.environ["VIRTUAL_ENV"]) / "bin"))
    parts = [p for p in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep) if p not in venv_bins]
    return os.pathsep.join(parts)


class _SparkDaemon(LocalService):
    optional = True
    daemon_class: str

    def _launch(self, *args: str, env: tuple[str, ...] = ()) -> tuple[str, ...]:
        """The daemon's command: ``env`` (``NAME=value`` words) set and :data:`SCRUBBED` unset."""
        home = spark_home()
        unset = [a for name in SCRUBBED for a in ("-u", name)]
        return ("/usr/bin/env", *unset, *env, str(home / "bin" / "spark-class"), self.daemon_class, *args)

    def environment(self) -> dict[str, str]:
        env = {
            "PATH": scrubbed_path(),
            "SPARK_HOME": str(spark_home()),
            # the marker on the daemon JVM's command line (``down`` finds it without a pid file)
            "SPARK_DAEMON_JAVA_OPTS": self.marker,
            "SPARK_LOG_DIR": str(self.dir / "logs"),
            "SPARK_CONF_DIR": str(self.dir / "conf"),
        }
        if self.local.java_home:
            env["JAVA_HOME"] = self.local.java_home
        return env

    def prepare(self) -> None:
        (self.dir / "conf").mkdir(parents=True, exist_ok=True)


class SparkMaster(_SparkDaemon):
    name = "spark-master"
    daemon_class = "org.apache.spark.deploy.master.Master"

    def ports(self) -> tuple[PortSpec, ...]:
        return (
            PortSpec("master", self.local.spark_master_port, "WIDEHOUSE_SPARK_MASTER_PORT"),
            PortSpec("web UI", self.local.spark_master_ui_port, "WIDEHOUSE_SPARK_MASTER_UI_PORT"),
        )

    def command(self) -> tuple[str, ...]:
        return self._launch(
            "--host",
            "127.0.0.1",
            "--port",
            str(self.local.spark_master_port),
            "--webui-port",
            str(self.local.spark_master_ui_port),
        )

    def probe(self) -> str | None:
        state = master_state(self.local)
        if isinstance(state, str):
            return state
        return None if state.get("status") == "ALIVE" else f"master status {state.get('status')!r}"


class SparkWorkers(_SparkDaemon):
    """Every worker of the local cluster, in one process group (each its own JVM and work dir).

    One service for N workers keeps ``up``/``down``/``status`` as simple as for the other services:
    a small shell runs the workers (``exec`` for one) and ``down`` stops its group.
    """

    name = "spark-worker"
    depends_on = ("spark-master",)
    daemon_class = "org.apache.spark.deploy.worker.Worker"

    def ports(self) -> tuple[PortSpec, ...]:
        return ()  # RPC and web UI ports are picked free by each worker (0)

    def work_dir(self, index: int) -> Path:
        return self.dir / f"worker-{index}" / "work"

    def local_dir(self, index: int) -> Path:
        """The worker's executors' scratch (``SPARK_LOCAL_DIRS``; Spark's default is ``/tmp``, where an
        executor stopped with its worker leaves its block manager and fetched files behind)."""
        return self.dir / f"worker-{index}" / "local"

    def scratch_env(self, index: int) -> tuple[str, ...]:
        """``NAME=value`` words that keep a worker's and its executors' scratch in :meth:`local_dir`:
        Spark's local dirs, and the JVMs' temp dir (an executor fetches each archive into
        ``createTempDir()`` before unpacking it: 97 MB, left in ``/tmp`` by a killed executor).
        Executors inherit the worker's environment; ``JAVA_TOOL_OPTIONS`` already set is kept."""
        local = self.local_dir(index)
        tool_options = " ".join(
            filter(None, (os.environ.get("JAVA_TOOL_OPTIONS"), f"-Djava.io.tmpdir={local}"))
        )
        return (f"SPARK_LOCAL_DIRS={local}", f"JAVA_TOOL_OPTIONS={tool_options}")

    def environment(self) -> dict[str, str]:
        env = super().environment()
        # finished applications' work dirs (each executor's unpacked archive, 281 MB) go after an
        # hour instead of piling up under the service dir
        env["SPARK_WORKER_OPTS"] = " ".join(f"-D{k}={v}" for k, v in WORKER_CLEANUP.items())
        return env

    def command(self) -> tuple[str, ...]:
        launches = [
            self._launch(
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--webui-port",
                "0",
                "--cores",
                str(self.local.spark_worker_cores),
                "--memory",
                self.local.spark_worker_memory,
                "--work-dir",
                str(self.work_dir(i)),
                self.local.spark_master_url,
                env=self.scratch_env(i),
            )
            for i in range(self.local.spark_workers)
        ]
        if len(launches) == 1:
            return launches[0]
        script = " & ".join(" ".join(_quote(a) for a in argv) for argv in launches) + " & wait"
        return ("/bin/sh", "-c", script)

    def prepare(self) -> None:
        """Make the work dirs, and empty the scratch of the workers' last run (nothing runs now)."""
        super().prepare()
        for i in range(self.local.spark_workers):
            self.work_dir(i).mkdir(parents=True, exist_ok=True)
            shutil.rmtree(self.local_dir(i), ignore_errors=True)
            self.local_dir(i).mkdir(parents=True)

    def probe(self) -> str | None:
        state = master_state(self.local)
        if isinstance(state, str):
            return state
        workers = state.get("workers")
        alive = [w for w in workers if w.get("state") == "ALIVE"] if isinstance(workers, list) else []
        want = self.local.spark_workers
        return None if len(alive) >= want else f"{len(alive)} of {want} workers registered"


def _quote(arg: str) -> str:
    return "'" + arg.replace("'", "'\\''") + "'"


def master_state(local: LocalServicesSettings) -> dict[str, Any] | str:
    """The master's JSON status (``/json/``), or why it cannot be read."""
    url = f"http://127.0.0.1:{local.spark_master_ui_port}/json/"
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:
            body = json.loads(reply.read().decode())
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return f"no answer on {url}: {exc}"
    if not isinstance(body, dict):
        return f"{url} answered {type(body).__name__}, not an object"
    return body

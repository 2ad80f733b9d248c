"""Local Airflow 3: API server, scheduler, DAG processor and triggerer on loopback.

Each component is a :class:`LocalService` (pid file, log, marker, health probe) under
``<state>/airflow/services/<component>``; :class:`AirflowStack` starts them with the generic
:class:`~widehouse.services.manager.ServiceManager` after ``airflow db migrate``. Metadata lives in
SQLite under ``<state>/airflow`` (0700) with the LocalExecutor (what ``airflow standalone`` uses),
DAGs come from the project's ``dags/``, the simple auth manager holds one admin user whose password
is generated per state dir by the first ``widehouse airflow up`` (unless WIDEHOUSE_AIRFLOW_PASSWORD
sets it), and Connections come from the committed dev-connections file through Airflow's local
file-system secrets backend. That file names the local ClickHouse service without its password (it
is generated per checkout too): ``up`` renders it into ``<state>/airflow/connections.json`` (0600)
with the local password filled in (:func:`render_connections`).

Two traps this module handles: every component and task runs with the venv's ``bin`` first on PATH
(Airflow starts ``airflow ...`` subprocesses), and ``core.execution_api_server_url`` (how tasks
reach the API server) always follows the API server's port. The JWT secret and the API secret key
must be equal in every component; they are generated once per state dir (``secrets.json``).
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from widehouse import private
from widehouse.contracts.identity import CLICKHOUSE_CONNECTION
from widehouse.errors import ConfigError, ServiceError
from widehouse.services.base import LocalService
from widehouse.services.manager import ServiceManager, ServiceStatus
from widehouse.services.process import PortSpec, rotate_log, tail
from widehouse.settings import AirflowSettings, LocalServicesSettings

API_SERVER = "airflow-api-server"
PLUGINS_DIR = Path(__file__).parents[1] / "operations" / "airflow_plugins"
SIMPLE_AUTH = "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
FILE_SECRETS = "airflow.secrets.local_filesystem.LocalFilesystemBackend"


def venv_bin() -> Path:
    """The directory of the running interpreter (the venv's ``bin``): Airflow must find ``airflow``."""
    return Path(sys.executable).parent


def airflow_environment(airflow: AirflowSettings, keys: dict[str, str], bin_dir: Path) -> dict[str, str]:
    """The ``AIRFLOW_*`` environment every component (and so every task) runs with."""
    url = airflow.url
    env = {
        "AIRFLOW_HOME": str(airflow.home),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "AIRFLOW__CORE__DAGS_FOLDER": str(airflow.dags_dir),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(PLUGINS_DIR),  # the Widehouse view (widehouse.operations)
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": "4",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{airflow.home / 'airflow.db'}",
        "AIRFLOW__CORE__AUTH_MANAGER": SIMPLE_AUTH,
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{airflow.user}:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords_file(airflow)),
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{url}/execution/",
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(airflow.port),
        "AIRFLOW__API__BASE_URL": url,
        "AIRFLOW__API__SECRET_KEY": keys["secret_key"],
        "AIRFLOW__API_AUTH__JWT_SECRET": keys["jwt_secret"],
        "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(airflow.home / "logs"),
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(airflow.worker_log_port),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(airflow.triggerer_log_port),
        # a new DAG file shows within ~10 s, a changed one is re-parsed within ~10 s
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "10",
        "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "10",
        "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "True",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
    }
    if airflow.connections_file is not None:
        env["AIRFLOW__SECRETS__BACKEND"] = FILE_SECRETS
        env["AIRFLOW__SECRETS__BACKEND_KWARGS"] = json.dumps(
            {"connections_file_path": str(connections_path(airflow))}
        )
    return env


def passwords_file(airflow: AirflowSettings) -> Path:
    return airflow.home / "simple_auth_manager_passwords.json"


def connections_path(airflow: AirflowSettings) -> Path:
    """The Connections file the components read: WIDEHOUSE_AIRFLOW_CONNECTIONS_FILE, rendered."""
    return airflow.home / "connections.json"


def write_private(path: Path, text: str) -> None:
    """Write a file only this user can read (0600 from the first byte, in a 0700 directory)."""
    private.private_dir(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, private.PRIVATE_FILE_MODE)
    os.fchmod(fd, private.PRIVATE_FILE_MODE)  # an existing file keeps its old mode through O_CREAT
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


def write_passwords_file(airflow: AirflowSettings) -> Path:
    """The simple auth manager's passwords file: the one user and its (generated or set) password."""
    if airflow.password is None:
        raise ConfigError(
            "the local Airflow user has no password: `widehouse airflow up` generates one for the state "
            "dir, or set WIDEHOUSE_AIRFLOW_PASSWORD"
        )
    path = passwords_file(airflow)
    write_private(path, json.dumps({airflow.user: airflow.password}))
    return path


def render_connections(source: Path, local: LocalServicesSettings) -> str:
    """The Connections file ``source`` with the local ClickHouse password filled in.

    Only a ``widehouse_clickhouse`` Connection that names the local service (loopback host, its port
    and user) and carries no password gets it: a Connection to any other server is left as written.
    """
    try:
        body = json.loads(source.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"cannot read the Airflow Connections file {source} (WIDEHOUSE_AIRFLOW_CONNECTIONS_FILE): {exc}"
        ) from exc
    conn = body.get(CLICKHOUSE_CONNECTION) if isinstance(body, dict) else None
    if (
        isinstance(conn, dict)
        and not conn.get("password")
        and local.clickhouse_password is not None
        and conn.get("host") in ("127.0.0.1", "localhost")
        and str(conn.get("port") or 8123) == str(local.clickhouse_port)
        and conn.get("login") == local.clickhouse_user
    ):
        conn["password"] = local.clickhouse_password
    return json.dumps(body, indent=2) + "\n"


def component_keys(airflow: AirflowSettings) -> dict[str, str]:
    """The JWT secret and API secret key shared by every component (made once per state dir)."""
    path = airflow.home / "secrets.json"
    try:
        keys: dict[str, str] = json.loads(path.read_text())
        if {"jwt_secret", "secret_key"} <= set(keys):
            return keys
    except (OSError, ValueError):
        pass  # missing or unreadable: make new ones (tokens of the old ones are merely invalidated)
    keys = {"jwt_secret": secrets.token_urlsafe(32), "secret_key": secrets.token_urlsafe(32)}
    write_private(path, json.dumps(keys))
    return keys


class AirflowComponent(LocalService):
    """One Airflow component, run as ``python -m airflow <command>`` with the stack's environment."""

    command_words: tuple[str, ...] = ()
    health_key: str = ""
    """The component's entry in the API server's /api/v2/monitor/health answer."""
    depends_on: tuple[str, ...] = (API_SERVER,)

    def __init__(self, local: LocalServicesSettings, airflow: AirflowSettings) -> None:
        self.airflow = airflow
        super().__init__(local)

    @property
    def dir(self) -> Path:
        return self.airflow.home / "services" / self.name

    @property
    def marker(self) -> str:
        # an interpreter -X option: Python ignores unknown ones, so the marker needs no CLI support
        return f"-Xwidehouse.service={self.name}@{self.local.state_dir}"

    def ports(self) -> tuple[PortSpec, ...]:
        return ()

    def command(self) -> tuple[str, ...]:
        return (sys.executable, self.marker, "-m", "airflow", *self.command_words)

    def environment(self) -> dict[str, str]:
        return airflow_environment(self.airflow, component_keys(self.airflow), venv_bin())

    def probe(self) -> str | None:
        health = fetch_health(self.airflow)
        if isinstance(health, str):
            return health
        status = (health.get(self.health_key) or {}).get("status")
        return None if status == "healthy" else f"{self.health_key} status {status!r}"

    def endpoints(self) -> list[str]:
        return [f"{p.label} {p.host}:{p.port}" for p in self.ports()] or ["-"]


class AirflowApiServer(AirflowComponent):
    name = API_SERVER
    command_words = ("api-server", "--workers", "1")
    health_key = "metadatabase"
    depends_on = ()

    def ports(self) -> tuple[PortSpec, ...]:
        return (PortSpec("ui/api", self.airflow.port, "WIDEHOUSE_AIRFLOW_PORT"),)

    def prepare(self) -> None:
        """Write the user's password and the Connections, and migrate the metadata DB, before the API
        server starts."""
        private.private_dir(self.airflow.home, tighten=True)
        write_passwords_file(self.airflow)
        if self.airflow.connections_file is not None:
            rendered = render_connections(self.airflow.connections_file, self.local)
            write_private(connections_path(self.airflow), rendered)
        migrate(self.airflow, {**os.environ, **self.environment()}, self.log_file)


class AirflowScheduler(AirflowComponent):
    name = "airflow-scheduler"
    command_words = ("scheduler",)
    health_key = "scheduler"

    def ports(self) -> tuple[PortSpec, ...]:
        return (PortSpec("log server", self.airflow.worker_log_port, "WIDEHOUSE_AIRFLOW_WORKER_LOG_PORT"),)


class AirflowDagProcessor(AirflowComponent):
    name = "airflow-dag-processor"
    command_words = ("dag-processor",)
    health_key = "dag_processor"


class AirflowTriggerer(AirflowComponent):
    name = "airflow-triggerer"
    command_words = ("triggerer",)
    health_key = "triggerer"

    def ports(self) -> tuple[PortSpec, ...]:
        return (
            PortSpec("log server", self.airflow.triggerer_log_port, "WIDEHOUSE_AIRFLOW_TRIGGERER_LOG_PORT"),
        )


COMPONENTS: tuple[type[AirflowComponent], ...] = (
    AirflowApiServer,
    AirflowScheduler,
    AirflowDagProcessor,
    AirflowTriggerer,
)


def migrate(airflow: AirflowSettings, env: dict[str, str], log_file: Path) -> None:
    """``airflow db migrate`` (idempotent); its output goes to the API server's log."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    rotate_log(log_file)  # before this run's output, which the API server's start then keeps
    with log_file.open("ab") as log:
        log.write(b"\n==== widehouse: airflow db migrate ====\n")
        log.flush()
        done = subprocess.run(
            [sys.executable, "-m", "airflow", "db", "migrate"],
            env=env,
            cwd=airflow.home,
            stdout=log,
            stderr=subprocess.STDOUT,
            timeout=900,
            check=False,
        )
    if done.returncode != 0:
        raise ServiceError(
            f"airflow db migrate failed with exit code {done.returncode}. Last lines of {log_file}:\n"
            f"{tail(log_file)}"
        )


def fetch_health(airflow: AirflowSettings) -> dict[str, Any] | str:
    """The API server's health answer, or why there is none."""
    url = f"{airflow.url}/api/v2/monitor/health"
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:  # noqa: S310 - loopback URL we built
            body: dict[str, Any] = json.loads(reply.read())
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return f"no answer on {url}: {exc}"
    return body


class AirflowStack:
    """``widehouse airflow up|down|status``: the four components as one unit."""

    def __init__(
        self,
        local: LocalServicesSettings,
        airflow: AirflowSettings,
        report: Any = None,
    ) -> None:
        self.airflow = airflow
        self.manager = ServiceManager(local, [c(local, airflow) for c in COMPONENTS], report=report)

    def up(self) -> list[str]:
        if not self.airflow.dags_dir.is_dir():
            raise ServiceError(
                f"the DAG folder {self.airflow.dags_dir} does not exist (WIDEHOUSE_AIRFLOW_DAGS_DIR)"
            )
        private.private_dir(self.airflow.home, tighten=True)  # metadata DB, logs, passwords: ours only
        return self.manager.up()

    def down(self) -> list[str]:
        return self.manager.down()

    def status(self) -> list[ServiceStatus]:
        return self.manager.status()

    def healthy(self) -> bool:
        return self.manager.healthy()

    def login_hint(self) -> str:
        return (
            f"Airflow UI: {self.airflow.url}  (user {self.airflow.user}; password: "
            f"`widehouse config --show-secrets`, also in {passwords_file(self.airflow)})"
        )

"""How the supervisor runs one slot group: a detached driver process, or a cluster submission.

Both implement :class:`Launcher`. :class:`LocalLauncher` (``WIDEHOUSE_SUPERVISOR_MODE=local``) runs
each group's driver on this machine as ``python -m widehouse stream --plan <snapshot> --group G`` in
its own session, with pid file, log and a per-group copy of the plan under
``<state>/streams/<group>/`` (the copy pins the topics the process was started with, whatever later
replans write to ``plan.json``). That is client mode against whatever ``WIDEHOUSE_SPARK_MASTER``
says: ``local[*]``, or a standalone ``spark://`` cluster, where Spark runs a Python driver only in
client mode (the executors get the code from ``WIDEHOUSE_SPARK_ARCHIVE`` / ``_PY_FILES``).
:class:`ClusterLauncher` (``cluster``, YARN and Kubernetes only: :func:`check_deploy_mode`) is
``spark-submit --deploy-mode cluster`` of ``spark/jobs/stream_wide.py``; the cluster manager owns the
process, so liveness there is the commit recency alone (``running`` returns None).

Secrets never go on a command line (``ps`` shows it to every user of the machine). A local group's
driver inherits them in its environment (the supervisor's, plus the Airflow Connections' overlay:
``WIDEHOUSE_PULSAR_AUTH_TOKEN`` from ``widehouse_pulsar``'s password). A cluster driver does not
inherit spark-submit's environment, so :data:`DRIVER_SECRETS` travel as the driver's environment
(``spark.yarn.appMasterEnv.*`` / ``spark.kubernetes.driverEnv.*``) in a 0600 properties file that
exists only while spark-submit runs (``--properties-file`` with ``--load-spark-defaults``, Spark 4).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

from widehouse.contracts.identity import spark_app_name
from widehouse.errors import ConfigError, OrchestrationError
from widehouse.planner import Plan, plan_to_dict
from widehouse.services.process import ManagedProcess, ProcessSpec, rotate_log, tail
from widehouse.settings import Settings
from widehouse.spark.shipping import ENV_NAME, ENV_PYTHON


class Launcher(Protocol):
    def start(self, group: str, plan: Plan) -> None:
        """Start ``group`` of ``plan`` (from its checkpoint)."""

    def finish(self, group: str) -> str | None:
        """After :meth:`stop`: commit the batch the stopped group left unfinished, on the topics it
        ran. None when done (or nothing was pending), else why not."""

    def running(self, group: str) -> bool | None:
        """True/False when this launcher can tell, None when only commits can (cluster)."""

    def stop(self, group: str) -> bool:
        """Stop at a batch boundary (SIGTERM, then grace); True if something was stopped."""

    def log_tail(self, group: str, lines: int = 30) -> str: ...


def group_dir(settings: Settings, group: str) -> Path:
    return settings.state_dir / "streams" / group


def write_snapshot(plan: Plan, group: str, path: Path) -> Path:
    """A copy of ``plan`` holding only ``group`` (what that process runs)."""
    body = plan_to_dict(plan)
    body["groups"] = [g for g in body["groups"] if g["name"] == group]
    topics = {t for g in body["groups"] for t in g["topics"]}
    body["partitions"] = {t: n for t, n in body["partitions"].items() if t in topics}
    body.pop("loads", None)
    if not body["groups"]:
        raise OrchestrationError(f"slot group {group!r} is not in the plan {plan.source}")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(body, indent=2) + "\n")
    os.replace(tmp, path)
    return path


class LocalLauncher:
    """One detached ``widehouse stream`` process per group (see the module docstring)."""

    def __init__(self, settings: Settings, env: Mapping[str, str] | None = None) -> None:
        self.settings = settings
        self.env = dict(env or {})
        self.grace = settings.stream.stop_grace_seconds + 15

    def process(self, group: str) -> ManagedProcess:
        root = group_dir(self.settings, group)
        marker = f"-Xwidehouse.service=stream-{group}@{self.settings.state_dir}"
        argv = (
            sys.executable,
            marker,
            "-m",
            "widehouse",
            "stream",
            "--plan",
            str(root / "plan.json"),
            "--group",
            group,
        )
        return ManagedProcess(
            ProcessSpec(
                name=f"stream-{group}",
                argv=argv,
                cwd=root,
                log_file=root / "stream.log",
                pid_file=root / "stream.pid",
                marker=marker,
                env=self.env,
            )
        )

    def start(self, group: str, plan: Plan) -> None:
        process = self.process(group)
        if process.stray_pids():
            process.stop(self.grace)
        write_snapshot(plan, group, group_dir(self.settings, group) / "plan.json")
        process.start()

    def running(self, group: str) -> bool | None:
        return self.process(group).pid() is not None

    def stop(self, group: str) -> bool:
        return self.process(group).stop(self.grace)

    def finish(self, group: str) -> str | None:
        """Run the stopped group once more with ``--available-now`` on its own snapshot (the topics
        it ran) when its checkpoint holds a planned batch with no commit: a batch cut by the stop
        grace. Its topics may move to other groups by the new plan, and a moved topic continues
        from the old group's *committed* position, which refuses to start while a planned batch of
        the old group read it; the replay under the new plan would not be the same batch either."""
        checkpoint = self.settings.stream.checkpoint(group)
        pending = unfinished_batch(checkpoint)
        snapshot = group_dir(self.settings, group) / "plan.json"
        if pending is None or not snapshot.is_file():
            return None
        process = self.process(group)
        argv = [*process.spec.argv, "--available-now"]
        log_file = group_dir(self.settings, group) / "stream.log"
        rotate_log(log_file)  # before this run's output, which the group's start then keeps
        with log_file.open("a") as log:
            log.write(f"==== widehouse: finishing batch {pending} of {group} before a plan change ====\n")
            log.flush()
            try:
                done = subprocess.run(
                    argv,
                    env={**os.environ, **self.env},
                    cwd=group_dir(self.settings, group),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    timeout=self.settings.supervisor.startup_seconds,
                    check=False,
                )
            except subprocess.TimeoutExpired:
                return f"finishing batch {pending} took over {self.settings.supervisor.startup_seconds:.0f} s"
        if done.returncode != 0:
            tail_text = self.log_tail(group)
            return f"finishing batch {pending} failed with exit code {done.returncode}:\n{tail_text}"
        return None

    def log_tail(self, group: str, lines: int = 30) -> str:
        return tail(group_dir(self.settings, group) / "stream.log", lines)


def check_deploy_mode(settings: Settings) -> None:
    """Refuse a supervisor mode Spark refuses: a Python app in cluster deploy mode runs only on YARN
    and Kubernetes ("Cluster deploy mode is currently not supported for python applications on
    standalone clusters"; local masters have no cluster to deploy to)."""
    master = settings.spark.master
    if settings.supervisor.mode != "cluster" or master == "yarn" or master.startswith("k8s://"):
        return
    raise ConfigError(
        f"WIDEHOUSE_SUPERVISOR_MODE=cluster submits each slot group with --deploy-mode cluster, which "
        f"Spark supports for Python apps on YARN and Kubernetes only, not WIDEHOUSE_SPARK_MASTER="
        f"{master}: set WIDEHOUSE_SUPERVISOR_MODE=local (each group's driver a detached client-mode "
        "process on this machine, against the same master)"
    )


DRIVER_SECRETS = ("WIDEHOUSE_PULSAR_AUTH_TOKEN",)
"""Variables a cluster driver gets through the private properties file, never the command line."""
DRIVER_ENV_PREFIXES = ("spark.yarn.appMasterEnv.", "spark.kubernetes.driverEnv.")


def driver_secret_properties(env: Mapping[str, str]) -> str:
    """The properties-file text that sets :data:`DRIVER_SECRETS` found in ``env`` as the cluster
    driver's environment (empty when there are none)."""
    lines = []
    for name in DRIVER_SECRETS:
        value = env.get(name)
        if not value:
            continue
        if any(c in value for c in "\\\n\r"):  # a JWT never has them; a properties file would mangle them
            raise ConfigError(f"{name} holds a backslash or a line break; it cannot go to the cluster driver")
        lines += [f"{prefix}{name}={value}" for prefix in DRIVER_ENV_PREFIXES]
    return "".join(f"{line}\n" for line in lines)


@contextmanager
def private_properties(text: str) -> Iterator[Path | None]:
    """``text`` in a 0600 temporary file for the duration of the block (None for no text)."""
    if not text:
        yield None
        return
    fd, name = tempfile.mkstemp(prefix="widehouse-submit-", suffix=".properties")  # 0600
    path = Path(name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        yield path
    finally:
        path.unlink(missing_ok=True)


def submit_command(
    settings: Settings, group: str, plan_uri: str, job: str, properties_file: Path | None = None
) -> list[str]:
    """``spark-submit --deploy-mode cluster`` of the stream entrypoint for one group (YARN, Kubernetes).

    ``plan_uri`` and ``job`` must be reachable from the cluster (e.g. on shared storage); the app's
    settings travel as ``spark.*.appMasterEnv`` / driver environment variables of the submission.
    The driver runs in the cluster too, so it takes its Python from the shipped archive like the
    executors (``./env/bin/python`` in its container's working directory).
    """
    check_deploy_mode(settings)
    spark = settings.spark
    command = [
        settings.supervisor.spark_submit,
        "--master",
        spark.master,
        "--deploy-mode",
        "cluster",
        "--name",
        spark_app_name(settings.stream.app, group),
        "--conf",
        "spark.yarn.submit.waitAppCompletion=false",
        "--conf",
        "spark.standalone.submit.waitAppCompletion=false",
        "--conf",
        "spark.kubernetes.submission.waitAppCompletion=false",
        "--conf",
        f"spark.driver.memory={spark.driver_memory}",
    ]
    if spark.jars:
        command += ["--jars", ",".join(spark.jars)]
    if spark.archive:
        command += ["--archives", f"{spark.archive}#{ENV_NAME}"]
        command += ["--conf", f"spark.pyspark.python={ENV_PYTHON}"]
        command += ["--conf", f"spark.pyspark.driver.python={ENV_PYTHON}"]
    elif spark.python:
        command += ["--conf", f"spark.pyspark.python={spark.python}"]
    if spark.py_files:
        command += ["--py-files", ",".join(spark.py_files)]
    for key, value in spark.extra_conf:
        command += ["--conf", f"{key}={value}"]
    if properties_file is not None:  # the driver's secrets; spark-defaults.conf still applies
        command += ["--properties-file", str(properties_file), "--load-spark-defaults"]
    return [*command, job, "--plan", plan_uri, "--group", group]


class ClusterLauncher:
    """Submits each group to the cluster; stopping and liveness belong to the cluster manager."""

    def __init__(
        self, settings: Settings, plan_uri: str, job: str, env: Mapping[str, str] | None = None
    ) -> None:
        self.settings = settings
        self.plan_uri = plan_uri
        self.job = job
        self.env = dict(env or {})

    def start(self, group: str, plan: Plan) -> None:
        env = {**os.environ, **self.env}
        with private_properties(driver_secret_properties(env)) as secrets:
            command = submit_command(self.settings, group, self.plan_uri, self.job, secrets)
            done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise OrchestrationError(
                f"spark-submit of slot group {group!r} failed ({done.returncode}): {done.stderr[-2000:]}"
            )

    def running(self, group: str) -> bool | None:
        return None

    def stop(self, group: str) -> bool:
        raise OrchestrationError(
            f"stopping slot group {group!r} on the cluster is not implemented: kill the app "
            f"{spark_app_name(self.settings.stream.app, group)} with the cluster manager"
        )

    def finish(self, group: str) -> str | None:
        return None  # stop() is the cluster manager's; so is a batch it cut (see stop)

    def log_tail(self, group: str, lines: int = 30) -> str:
        return "(cluster mode: see the cluster manager's driver log)"


def unfinished_batch(checkpoint: str) -> int | None:
    """The id of a batch planned in a local checkpoint (``offsets/N``) with no ``commits/N``, or None.

    Only local paths are read (no Spark here); for a remote checkpoint this returns None.
    """
    if "://" in checkpoint and not checkpoint.startswith("file:"):
        return None
    root = Path(checkpoint.removeprefix("file://").removeprefix("file:"))

    def ids(name: str) -> set[int]:
        folder = root / name
        return {int(f.name) for f in folder.iterdir() if f.name.isdigit()} if folder.is_dir() else set()

    planned = ids("offsets")
    if not planned:
        return None
    last = max(planned)
    return None if last in ids("commits") else last

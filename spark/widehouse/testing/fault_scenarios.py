"""The fault suite's scenarios; each returns a :class:`~widehouse.testing.faults.Outcome` (a table row).

- ``sigkills``: SIGKILLs of the streaming app from this process at random moments, inside a Delta
  commit (aimed: a data file written, its log entry not yet), and at the ``--fault`` points inside the
  ClickHouse inserts / between the sinks; each followed by a restart from the checkpoint.
- ``clickhouse``: a ClickHouse service of our own SIGKILLed mid-stream and restarted after an outage;
  the app rides it out with its in-process restarts.
- ``pulsar``: a Pulsar standalone of our own SIGKILLed mid-stream and restarted.
- ``disk_full``: the state dir on a small tmpfs, filled up mid-stream: the app must fail saying so,
  then recover once the space is back.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from widehouse.testing.faults import FaultDeployment, Outcome, fill, free_port, in_delta_commit, kill, stop

KINDS = (
    "random",
    "delta-commit",
    "random",
    "clickhouse-insert",
    "random",
    "after-clickhouse",
    "random",
    "after-delta",
)


def _finish(outcome: Outcome, deployment: FaultDeployment, spark: Any, manifest: Any) -> Outcome:
    run = deployment.drain()
    if run.returncode != 0:
        outcome.notes.append(f"drain exited {run.returncode}: {run.stdout[-400:]}")
        return outcome
    outcome.lost, outcome.duplicated, problems = deployment.compare(spark, manifest)
    outcome.notes += problems[:3]
    return outcome


def _recovered(
    outcome: Outcome, deployment: FaultDeployment, process: subprocess.Popen[str], last: int
) -> bool:
    """Wait for the app, still running through the fault, to commit a batch after ``last``: count the
    recovery and its time, or note that it did not recover."""
    back = time.monotonic()
    try:
        deployment.wait_commit_after(last, process)
    except (RuntimeError, TimeoutError) as exc:
        outcome.notes.append(f"the app did not recover by itself: {exc}")
        return False
    outcome.recoveries += 1
    outcome.recover_s.append(time.monotonic() - back)
    return True


def sigkills(root: Path, spark: Any, kills: int, rate: float, events: int, *, seed: int = 7) -> Outcome:
    rng = random.Random(seed)  # noqa: S311 - reproducible fault timing, not a secret
    outcome = Outcome(f"SIGKILL of the streaming app x{kills}")
    deployment = FaultDeployment(root / "sigkill")
    from widehouse.stream.tables import delta_partials

    partials = Path(delta_partials(deployment.settings.delta, "user_hourly"))
    deployment.plan()
    traffic = deployment.publish_live(events, rate, seed=seed)  # live until the last kill
    killed_at: float | None = None
    where: dict[str, int] = {}
    for number in range(kills):
        kind = KINDS[number % len(KINDS)]
        if not traffic.is_alive():
            if not deployment.inside_batch():  # no new data will come: a restart would wait forever
                outcome.notes.append(f"the traffic ended after {number} kills")
                break
            kind = "random"  # a --fault point of a future batch would never be reached
        last = deployment.last_commit()
        args = ["--fault", f"{kind}@{last + 2}:kill"] if kind not in ("random", "delta-commit") else []
        process = deployment.start(*args)
        try:
            deployment.wait_commit_after(last, process)
        except (RuntimeError, TimeoutError) as exc:
            kill(process)
            outcome.notes.append(f"kill {number}: no recovery ({exc})")
            break
        if killed_at is not None:
            outcome.recoveries += 1
            outcome.recover_s.append(time.monotonic() - killed_at)
        _strike(kind, process, partials, rng, outcome=outcome, fault=f"{kind}@{last + 2}")
        killed_at = time.monotonic()
        outcome.injected += 1
        label = f"{kind} ({'in batch' if deployment.inside_batch() else 'between batches'})"
        where[label] = where.get(label, 0) + 1
    final = _finish(outcome, deployment, spark, traffic.finish())
    if killed_at is not None and final.lost is not None:
        final.recoveries += 1  # the last kill's restart is the drain (timed only for the others)
    final.notes.insert(0, ", ".join(f"{k} {v}" for k, v in sorted(where.items())))
    return final


def _strike(
    kind: str,
    process: subprocess.Popen[str],
    partials: Path,
    rng: random.Random,
    *,
    outcome: Outcome,
    fault: str,
) -> None:
    """Kill the app: now after a random pause, inside a Delta commit, or wait for its --fault kill."""
    if kind == "random":
        time.sleep(rng.uniform(0.5, 8.0))
    elif kind == "delta-commit":
        deadline = time.monotonic() + 300
        while not in_delta_commit(partials) and time.monotonic() < deadline:
            time.sleep(0.05)
    else:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=300)
        if process.returncode != -signal.SIGKILL:
            outcome.notes.append(f"{fault} not reached")
    kill(process)


# -------------------------------------------------------------------------- ClickHouse of our own
class OwnClickHouse:
    """``python -m widehouse.clickhouse.server`` on its own data dir and port (restartable)."""

    def __init__(self, root: Path, port: int, user: str, password: str) -> None:
        self.root, self.port, self.user, self.password = root, port, user, password
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 180) -> None:
        argv = [
            sys.executable, "-m", "widehouse.clickhouse.server", "--data-dir", str(self.root / "data"),
            "--port", str(self.port), "--user", self.user, "--log-file", str(self.root / "server.log"),
        ]  # fmt: skip
        env = {**os.environ, "WIDEHOUSE_CLICKHOUSE_PASSWORD": self.password}
        self.process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"own ClickHouse exited with {self.process.returncode}; see {self.root}/server.log"
                )
            request = urllib.request.Request(
                f"http://127.0.0.1:{self.port}/?query=SELECT%201",
                headers={"X-ClickHouse-User": self.user, "X-ClickHouse-Key": self.password},
            )
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(request, timeout=5) as response,  # noqa: S310 - loopback URL we built
            ):
                if response.status == 200:
                    return
            time.sleep(0.5)
        raise TimeoutError(f"own ClickHouse did not answer on port {self.port} in {timeout} s")

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(60)


def clickhouse(
    root: Path, spark: Any, rate: float, events: int, *, outage_s: float = 20.0, tail_s: float = 300.0
) -> Outcome:
    """The traffic lasts until the app recovered (it must have batches to fail and to recover with),
    at most ``outage_s + tail_s`` seconds at ``rate`` (or ``events``, if more)."""
    outcome = Outcome("ClickHouse service SIGKILL + restart")
    port, user, password = free_port(), "widehouse", "fault-suite"
    server = OwnClickHouse(root / "clickhouse-server", port, user, password)
    server.root.mkdir(parents=True, exist_ok=True)
    server.start()
    env = {
        "WIDEHOUSE_CLICKHOUSE_PORT": str(port),
        "WIDEHOUSE_CLICKHOUSE_USER": user,
        "WIDEHOUSE_CLICKHOUSE_PASSWORD": password,
        "WIDEHOUSE_STREAM_MAX_RESTARTS": "30",
        "WIDEHOUSE_STREAM_RESTART_BACKOFF_MAX_SECONDS": "5",
    }
    deployment = FaultDeployment(root / "clickhouse", extra_env=env)
    try:
        deployment.plan()
        # traffic for the whole fault: the app must have batches to fail and to recover with
        traffic = deployment.publish_live(max(events, int(rate * (outage_s + tail_s))), rate, seed=8)
        process = deployment.start()
        deployment.wait_commit_after(-1, process)
        server.kill()
        outcome.injected += 1
        time.sleep(outage_s)
        server.start()
        if _recovered(outcome, deployment, process, deployment.last_commit()):
            outcome.notes.append(f"outage {outage_s:.0f} s, same app process (in-process restarts)")
        manifest = traffic.finish()
        stop(process)
        return _finish(outcome, deployment, spark, manifest)
    finally:
        server.kill()


# -------------------------------------------------------------------------- Pulsar of our own
def pulsar(root: Path, spark: Any, events: int) -> Outcome:
    from widehouse.services.pulsar import PulsarStandalone

    outcome = Outcome("Pulsar broker SIGKILL + restart")
    env = {
        "WIDEHOUSE_PULSAR_BROKER_PORT": str(free_port()),
        "WIDEHOUSE_PULSAR_WEB_PORT": str(free_port()),
        "WIDEHOUSE_STREAM_MAX_RESTARTS": "30",
        "WIDEHOUSE_STREAM_RESTART_BACKOFF_MAX_SECONDS": "5",
        "WIDEHOUSE_STREAM_MAX_MESSAGES": "300",
    }
    deployment = FaultDeployment(root / "pulsar", extra_env=env)
    broker_state = FaultDeployment(root / "pulsar-broker", extra_env=env)
    service = PulsarStandalone(broker_state.settings.local)

    def up() -> None:
        proc = service.start()
        proc.wait_healthy(service.probe, timeout=600)

    up()
    process: subprocess.Popen[str] | None = None
    try:
        deployment.plan()
        manifest = deployment.publish(events, seed=9)  # before: a producer cannot outlive the outage
        process = deployment.start()
        deployment.wait_commit_after(-1, process)
        pid = service.process.pid()
        if pid is None:
            raise RuntimeError("our Pulsar broker is not running")
        os.killpg(pid, signal.SIGKILL)  # the broker's whole process group (its JVM)
        outcome.injected += 1
        while service.process.pid() is not None:
            time.sleep(0.2)
        down = time.monotonic()
        _wait_ports_free(service, timeout=120)  # a killed JVM may hold its sockets a moment longer
        up()
        outcome.notes.append(f"broker down {time.monotonic() - down:.0f} s (restart included)")
        _recovered(outcome, deployment, process, deployment.last_commit())
        stop(process)
        return _finish(outcome, deployment, spark, manifest)
    finally:
        if process is not None:
            kill(process)  # never leave the app retrying against a broker that is gone
        with contextlib.suppress(Exception):  # best effort: never leave our broker behind
            service.process.stop(timeout=60)


def _wait_ports_free(service: Any, timeout: float) -> None:
    """Until every port of ``service`` can be bound again (or raise naming the one still held)."""
    from widehouse.services.process import port_is_free

    deadline = time.monotonic() + timeout
    for port in service.process.spec.ports:
        while not port_is_free(port.port, port.host):
            if time.monotonic() > deadline:
                raise TimeoutError(f"port {port.host}:{port.port} still held {timeout:.0f} s after the kill")
            time.sleep(0.5)


# -------------------------------------------------------------------------- a full state disk
def disk_full(
    root: Path, spark: Any, rate: float, events: int, *, size_mb: int = 512, traffic_s: float = 420.0
) -> Outcome:
    """The traffic lasts through the failure and the restart after it, at most ``traffic_s`` seconds."""
    outcome = Outcome(f"state dir on a {size_mb} MB tmpfs filled up")
    mount = root / "small-fs"
    mount.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        outcome.notes.append(f"skipped: cannot mount a tmpfs here ({mounted.stderr.strip()})")
        return outcome
    env = {"WIDEHOUSE_STREAM_MAX_RESTARTS": "2", "WIDEHOUSE_STREAM_RESTART_BACKOFF_MAX_SECONDS": "2"}
    deployment = FaultDeployment(root / "disk", extra_env=env, state_dir=mount / "state")
    deployment.root.mkdir(parents=True, exist_ok=True)
    filler = mount / "filler"
    process: subprocess.Popen[str] | None = None
    try:
        deployment.plan()
        traffic = deployment.publish_live(max(events, int(rate * traffic_s)), rate, seed=10)
        process = deployment.start()
        deployment.wait_commit_after(-1, process)
        fill(filler)
        outcome.injected += 1
        try:
            process.wait(timeout=600)
        except subprocess.TimeoutExpired:
            outcome.notes.append("the app kept running on a full disk for 600 s")
        kill(process)
        said = "No space left on device" in deployment.last_log.read_text(errors="replace")
        outcome.notes.append(f"app exit {process.returncode}, log names 'No space left on device': {said}")
        filler.unlink()
        back = time.monotonic()
        last = deployment.last_commit()
        process = deployment.start()
        deployment.wait_commit_after(last, process)
        outcome.recoveries += 1
        outcome.recover_s.append(time.monotonic() - back)
        stop(process)
        return _finish(outcome, deployment, spark, traffic.finish())
    finally:
        if process is not None:
            kill(process)  # before the file system goes away under it
        with contextlib.suppress(FileNotFoundError):
            filler.unlink()
        subprocess.run(["umount", "-l", str(mount)], check=False)

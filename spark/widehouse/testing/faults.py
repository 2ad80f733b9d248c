"""The fault suite's machinery: an isolated deployment, live traffic, the app as a process, read-back.

Used by ``python -m bench faults`` and by ``tests/integration/test_faults.py`` (short versions). The
streaming app runs exactly as a user runs it (``python -m widehouse stream``) in its own process group,
so a SIGKILL sent from here takes its JVM with it; traffic comes from the generator, whose manifest is
the oracle: after the faults the app drains the topics and both sinks are compared with the manifest
row by row (lost = counts missing, duplicated = counts beyond the manifest, over every count column,
quarantine and late rows).
"""

from __future__ import annotations

import contextlib
import errno
import os
import random
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from widehouse.contracts.tables import LATE, QUARANTINE

TIMEOUT = 900.0
LIVE_CHUNK_S = 2.0
"""Live traffic is generated (and accounted) in chunks of this many seconds: a stop waits at most that."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Outcome:
    """One fault scenario's row of the table."""

    fault: str
    injected: int = 0
    recoveries: int = 0
    lost: int | None = None
    duplicated: int | None = None
    recover_s: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def row(self) -> list[object]:
        times = sorted(self.recover_s)
        spread = f"{times[len(times) // 2]:.0f} s (max {times[-1]:.0f} s)" if times else "-"
        return [
            self.fault,
            self.injected,
            self.recoveries,
            "-" if self.lost is None else self.lost,
            "-" if self.duplicated is None else self.duplicated,
            spread,
            "; ".join(self.notes),
        ]


HEADER = ["fault", "injected", "recoveries", "lost", "duplicated", "time to recover (median)", "notes"]


@dataclass
class FaultDeployment:
    """An isolated deployment: own state dir, tenants, ClickHouse database; one slot group g001."""

    root: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    suffix: str = field(default_factory=lambda: "f" + uuid.uuid4().hex[:7])
    state_dir: Path | None = None
    last_log: Path = field(init=False)
    """The log (stdout and stderr) of the app started last."""

    @property
    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "WIDEHOUSE_STATE_DIR": str(self.state_dir or self.root / "state"),
            "WIDEHOUSE_TENANT_SUFFIX": self.suffix,
            "WIDEHOUSE_SPARK_MASTER": "local[2]",
            "WIDEHOUSE_SPARK_SHUFFLE_PARTITIONS": "2",
            "WIDEHOUSE_STREAM_TRIGGER_SECONDS": "2",
            "WIDEHOUSE_STREAM_STOP_GRACE_SECONDS": "30",
            "WIDEHOUSE_STREAM_MAX_MESSAGES": "1500",
            "WIDEHOUSE_CLICKHOUSE_DATABASE": f"wh_{self.suffix}",
            **self.extra_env,
        }

    @property
    def settings(self) -> Any:
        from widehouse.settings import load_settings

        return load_settings(self.env)

    @property
    def plan_path(self) -> Path:
        return self.root / "plan.json"

    @property
    def checkpoint(self) -> Path:
        return Path(self.settings.stream.checkpoint("g001"))

    def plan(self, topics: str | None = None) -> None:
        """One slot group over the catalog's topics (those matching ``topics``)."""
        import re

        from widehouse.catalog import load_catalog
        from widehouse.planner import TopicTraffic, plan, save_plan
        from widehouse.settings import PlannerSettings

        catalog = load_catalog(self.settings.schemas_dir).relocated(self.suffix)
        names = [str(t.name) for t in catalog.topics if topics is None or re.search(topics, str(t.origin))]
        traffic = [TopicTraffic(t, 100.0, 10_000.0) for t in names]
        load = sum(t.load(PlannerSettings()) for t in traffic)
        one = PlannerSettings(slot_capacity=load * 2, target_fill=0.8, isolation=0.8)
        the_plan = plan(traffic, one)
        if len(the_plan.groups) != 1:
            raise RuntimeError(f"expected one slot group, the planner made {len(the_plan.groups)}")
        save_plan(the_plan, self.plan_path)

    # -- traffic -------------------------------------------------------------------------------
    def publish(
        self,
        count: int,
        rate: float = 0,
        seed: int = 1,
        topics: str | None = None,
        *,
        traffic: Traffic | None = None,
    ) -> Any:
        """Publish ``count`` messages (at ``rate`` per second; 0 = at once); the manifest.

        With ``traffic``: tell it when publishing starts, and end early (exactly accounted) once
        :meth:`Traffic.finish` is called; chunks of ~``LIVE_CHUNK_S`` of traffic bound the delay."""
        from widehouse.generator.options import GenerateOptions
        from widehouse.generator.run import generate

        chunks: dict[str, Any] = (
            {"chunk_size": max(1, int(rate * LIVE_CHUNK_S))} if traffic is not None and rate else {}
        )
        options = GenerateOptions(
            count=count,
            rate=rate,
            seed=seed,
            users=200,
            tenant_suffix=self.suffix,
            create_topics=True,
            topics=topics,
            **chunks,
        )
        if traffic is None:
            return generate(self.settings, options)
        return generate(self.settings, options, progress=traffic.progress, stop=traffic.halt)

    def publish_live(self, count: int, rate: float, seed: int = 1, topics: str | None = None) -> Traffic:
        """Start publishing in the background; returns once the producers are up (topics exist).

        ``count`` is the most it sends: :meth:`Traffic.finish` ends it as soon as the scenario is done
        with live traffic, so a generous count costs no time."""
        traffic = Traffic(lambda: self.publish(count, rate, seed, topics, traffic=traffic))
        traffic.start()
        traffic.wait_publishing()
        return traffic

    # -- the app ---------------------------------------------------------------------------------
    def start(self, *args: str) -> subprocess.Popen[str]:
        from widehouse.testing import stream_command

        command = stream_command(self.plan_path, *args)
        self.last_log = self.root / f"stream-{time.time_ns()}.log"
        log = self.last_log.open("w")
        return subprocess.Popen(
            command, env=self.env, stdout=log, stderr=subprocess.STDOUT, text=True, start_new_session=True
        )

    def drain(self, timeout: float = TIMEOUT) -> subprocess.CompletedProcess[str]:
        """Run the app with ``--available-now`` to its end (everything published so far)."""
        process = self.start("--available-now")
        try:
            process.wait(timeout=timeout)
        finally:
            kill(process)
        out = self.last_log.read_text(errors="replace")
        return subprocess.CompletedProcess(process.args, process.returncode, out, "")

    def batches(self, kind: str) -> list[int]:
        folder = self.checkpoint / kind
        return sorted(int(p.name) for p in folder.glob("[0-9]*")) if folder.is_dir() else []

    def last_commit(self) -> int:
        done = self.batches("commits")
        return done[-1] if done else -1

    def inside_batch(self) -> bool:
        """A batch was planned and not committed (the kill hit a batch, not the pause between two)."""
        planned, done = self.batches("offsets"), self.batches("commits")
        return bool(planned) and (not done or planned[-1] > done[-1])

    def wait_commit_after(
        self, batch: int, process: subprocess.Popen[str], timeout: float = TIMEOUT
    ) -> float:
        """Seconds until a batch newer than ``batch`` is committed (the app recovered and moved on)."""
        start = time.monotonic()
        while self.last_commit() <= batch:
            if process.poll() is not None:
                raise RuntimeError(
                    f"the stream exited with {process.returncode} before committing a batch > {batch}"
                )
            if time.monotonic() - start > timeout:
                raise TimeoutError(f"no batch after {batch} committed in {timeout:.0f} s")
            time.sleep(0.2)
        return time.monotonic() - start

    # -- read back and compare -------------------------------------------------------------------
    def compare(self, spark: Any, manifest: Any) -> tuple[int, int, list[str]]:
        """(lost, duplicated, differences) of both sinks against the manifest."""
        from widehouse import clickhouse
        from widehouse.catalog import load_catalog
        from widehouse.generator.manifest import diff_rows
        from widehouse.stream.spark.readback import merged_rows

        settings = self.settings
        catalog = load_catalog(settings.schemas_dir).relocated(self.suffix)
        client = clickhouse.connect(settings.clickhouse)
        lost = duplicated = 0
        problems: list[str] = []
        try:
            for table in manifest.tables():
                wide = catalog.table(table)
                want = manifest.expected_rows(table)
                counted = [c.name for c in wide.columns if c.agg == "count"]
                ch = {
                    (r[wide.key_name], r[wide.grain]): r
                    for r in client.query(f"SELECT * FROM {table}_merged").named_results()
                }
                frame = merged_rows(spark, catalog, settings.delta, table)
                dl = {(r[wide.key_name], r[wide.grain]): r.asDict() for r in frame.collect()}
                for sink, got in (("clickhouse", ch), ("delta", dl)):
                    problems += [f"{sink} {table}: {p}" for p in diff_rows(want, got, limit=5)]
                    less, more = _count_gaps(want, got, counted)
                    lost, duplicated = lost + less, duplicated + more
            counts = manifest.counts()
            for side, expected in ((QUARANTINE, counts.quarantined), (LATE, counts.late)):
                ch_n = int(client.query(f"SELECT count() FROM {side}").result_rows[0][0])
                dl_n = spark.read.format("delta").load(settings.delta.path("bronze", side)).count()
                for sink, n in (("clickhouse", ch_n), ("delta", dl_n)):
                    lost += max(0, expected - n)
                    duplicated += max(0, n - expected)
                    if n != expected:
                        problems.append(f"{sink} {side}: {n} rows, expected {expected}")
        finally:
            client.close()
        return lost, duplicated, problems


def _count_gaps(want: dict[Any, Any], got: dict[Any, Any], columns: list[str]) -> tuple[int, int]:
    from widehouse.generator.manifest import normalize

    actual = {(normalize(k), normalize(p)): v for (k, p), v in got.items()}
    less = more = 0
    for key in set(want) | set(actual):
        for column in columns:
            expected = (want.get(key) or {}).get(column) or 0
            value = normalize((actual.get(key) or {}).get(column)) or 0
            less += max(0, expected - value)
            more += max(0, value - expected)
    return less, more


class Traffic(threading.Thread):
    """The generator publishing in the background; :attr:`manifest` once it is done."""

    def __init__(self, run: Callable[[], Any]) -> None:
        super().__init__(daemon=True, name="traffic")
        self._run = run
        self.manifest: Any = None
        self.error: BaseException | None = None
        self.halt = threading.Event()
        """Set by :meth:`finish`: the generator stops after the chunk it is sending."""
        self.publishing = threading.Event()
        """Set when the first message is about to go out (producers up, topics created)."""

    def run(self) -> None:
        try:
            self.manifest = self._run()
        except BaseException as exc:  # reported by result(): the caller's thread raises it
            self.error = exc
        finally:
            self.publishing.set()  # never leave wait_publishing() hanging on a failed start

    def progress(self, _sent: int, _total: int | None, _elapsed: float) -> None:
        self.publishing.set()

    def wait_publishing(self, timeout: float = TIMEOUT) -> None:
        """Until the generator sends (or raise its error, or TimeoutError)."""
        if not self.publishing.wait(timeout):
            raise TimeoutError(f"the generator did not start publishing in {timeout:.0f} s")
        if self.error is not None:
            raise RuntimeError(f"the generator failed: {self.error}") from self.error

    def finish(self, timeout: float = TIMEOUT) -> Any:
        """End the traffic now (after the chunk being sent) and return its manifest."""
        self.halt.set()
        return self.result(timeout)

    def result(self, timeout: float = TIMEOUT) -> Any:
        self.join(timeout)
        if self.is_alive():
            raise TimeoutError(f"the generator did not finish in {timeout:.0f} s")
        if self.error is not None:
            raise RuntimeError(f"the generator failed: {self.error}") from self.error
        return self.manifest


def kill(process: subprocess.Popen[str]) -> None:
    """SIGKILL the app's whole process group (the Python driver and its JVM) and reap it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=60)


def stop(process: subprocess.Popen[str]) -> None:
    """Stop the app cleanly (SIGTERM: it ends at a batch boundary; up to 120 s), then :func:`kill`
    whatever is left of its process group."""
    process.send_signal(signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=120)
    kill(process)


def in_delta_commit(table_dir: Path) -> bool:
    """A data file newer than the table's last log entry: a commit is being written right now."""
    log = table_dir / "_delta_log"
    entries = list(log.glob("*.json"))
    if not entries:
        return False
    newest_log = max(p.stat().st_mtime for p in entries)
    for part in table_dir.rglob("*.parquet"):
        with contextlib.suppress(FileNotFoundError):
            if part.stat().st_mtime > newest_log:
                return True
    return False


def fill(path: Path, chunk: int = 1 << 20) -> int:
    """Write zeros to ``path`` until the file system is full; returns the bytes written."""
    written = 0
    block = b"\0" * chunk
    with path.open("wb", buffering=0) as out:  # unbuffered: nothing left to fail at close
        while True:
            try:
                written += out.write(block) or 0
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                if chunk > 4096:
                    chunk //= 16
                    block = b"\0" * chunk
                    continue
                return written


def random_pause(rng: random.Random, low: float, high: float) -> None:
    time.sleep(rng.uniform(low, high))

"""Run a generated Flink SQL job in PyFlink and time it; ``bench.flink_compare`` starts this script.

Runs in the Flink virtualenv (``scripts/flink-setup``: PyFlink and the Pulsar connector), not in the
project's: it imports neither widehouse nor the bench package, only the standard library and
pyflink. Input: a JSON spec (``statements``: the DDL and the final INSERT, ``jars``: connector jars,
``parallelism``, ``result``: where to write the figures). The job runs in batch mode on a local
mini-cluster (bounded Pulsar sources: earliest to the latest message when the job starts).

Figures written (seconds, ``time.time()`` epochs where named ``*_at``):

- ``started_at``: this process started (before the JVM);
- ``submitted_at``: the INSERT was submitted (JVM up, tables declared, the plan built);
- ``running_at`` / ``finished_at``: the job's RUNNING and FINISHED times as Flink records them
  (REST, ``/jobs/<id>``); ``sources_running_at``: the first source task running (it starts
  reading right away);
- ``net_runtime_s``: Flink's own job run time (``JobExecutionResult``);
- ``restarts``: failures the job restarted from (its exception history);
- ``versions``: PyFlink, Java.

    .venv-flink/bin/python bench/_flink_job.py spec.json
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class JobWatcher(threading.Thread):
    """Polls the mini-cluster's REST API for the job's details until it ends; keeps the last answer."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.job_id: str | None = None
        self.details: dict[str, Any] = {}
        self.exceptions: dict[str, Any] = {}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            if self.job_id is not None:
                try:
                    url = f"http://127.0.0.1:{self.port}/jobs/{self.job_id}"
                    with urllib.request.urlopen(url, timeout=2) as answer:
                        self.details = json.loads(answer.read())
                    with urllib.request.urlopen(f"{url}/exceptions", timeout=2) as answer:
                        self.exceptions = json.loads(answer.read())
                except OSError:  # the mini-cluster is starting or already gone: keep the last answer
                    pass
                if self.details.get("state") in {"FINISHED", "FAILED", "CANCELED"}:
                    return
            time.sleep(0.2)


def run(spec: dict[str, Any]) -> dict[str, Any]:
    started_at = time.time()
    from pyflink.table import EnvironmentSettings, TableEnvironment
    from pyflink.version import __version__ as pyflink_version

    port = free_port()
    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    conf = env.get_config()
    conf.set("pipeline.jars", ";".join(Path(j).resolve().as_uri() for j in spec["jars"]))
    conf.set("parallelism.default", str(spec["parallelism"]))
    conf.set("rest.port", str(port))
    conf.set("rest.bind-address", "127.0.0.1")
    conf.set("rest.address", "127.0.0.1")
    conf.set("table.exec.resource.default-parallelism", str(spec["parallelism"]))
    for key, value in spec.get("config", {}).items():
        conf.set(key, str(value))
    *ddl, insert = spec["statements"]
    for statement in ddl:
        env.execute_sql(statement)
    watcher = JobWatcher(port)
    watcher.start()
    result = env.execute_sql(insert)
    submitted_at = time.time()
    client = result.get_job_client()
    assert client is not None, "the INSERT started no job"
    watcher.job_id = str(client.get_job_id())
    execution = client.get_job_execution_result().result()
    ended_at = time.time()
    watcher.join(timeout=5)
    watcher.done.set()
    details = watcher.details
    stamps = details.get("timestamps", {})
    sources = [v for v in details.get("vertices", []) if "Source" in v.get("name", "")]
    starts = [v["start-time"] for v in sources if v.get("start-time", -1) > 0]
    from pyflink.java_gateway import get_gateway

    system = get_gateway().jvm.java.lang.System
    # the print sink writes the changelog to the JVM's (buffered) standard output, which this
    # process's exit would cut short: its last lines are the last updates of the busiest keys
    system.out.flush()
    return {
        "started_at": started_at,
        "submitted_at": submitted_at,
        "ended_at": ended_at,
        "running_at": stamps.get("RUNNING", 0) / 1000 or None,
        "finished_at": stamps.get("FINISHED", 0) / 1000 or None,
        "sources_running_at": min(starts, default=0) / 1000 or None,
        "state": details.get("state"),
        "restarts": len(watcher.exceptions.get("exceptionHistory", {}).get("entries", [])),
        "net_runtime_s": execution.get_net_runtime() / 1000,
        "vertices": [
            {
                "name": v.get("name", "")[:200],
                "parallelism": v.get("parallelism"),
                "duration_ms": v.get("duration"),
            }
            for v in details.get("vertices", [])
        ],
        "versions": {
            "pyflink": pyflink_version,
            "java": str(system.getProperty("java.version")),
            "java_vendor": str(system.getProperty("java.vendor")),
        },
    }


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[0]).read_text())
    figures = run(spec)
    Path(spec["result"]).write_text(json.dumps(figures, indent=2))
    print(json.dumps({k: v for k, v in figures.items() if k != "vertices"}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

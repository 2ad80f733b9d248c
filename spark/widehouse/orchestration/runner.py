"""Run a ``widehouse`` job entrypoint as a subprocess of a task, with its output in the task log.

Tasks never import pyspark: a Spark job runs in its own interpreter (the same venv's python), with
the task's environment plus the ``WIDEHOUSE_*`` overlay from the Airflow Connections.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

log = logging.getLogger(__name__)

TAIL_LINES = 40


@dataclass(frozen=True)
class JobResult:
    argv: tuple[str, ...]
    code: int
    tail: str
    """The last lines of the job's output (for error messages)."""


Runner = Callable[[Sequence[str], Mapping[str, str]], JobResult]
"""Runs ``widehouse ARGS`` with an environment overlay; injected in tests."""


def widehouse_argv(args: Sequence[str]) -> list[str]:
    """``python -m widehouse ARGS`` with the running interpreter (the project venv)."""
    return [sys.executable, "-m", "widehouse", *args]


def run_widehouse(args: Sequence[str], env: Mapping[str, str]) -> JobResult:
    """Run ``widehouse ARGS``, echoing each output line to the log; returns code and output tail.

    No timeout here: the task's ``execution_timeout`` bounds it (Airflow kills the task's process
    group, this child included).
    """
    argv = widehouse_argv(args)
    log.info("running: widehouse %s", " ".join(args))
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    with subprocess.Popen(
        argv,
        env={**os.environ, **env},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
    ) as process:
        assert process.stdout is not None
        for raw in process.stdout:
            line = raw.rstrip("\n")
            tail.append(line)
            log.info("| %s", line)
        code = process.wait()
    return JobResult(tuple(argv), code, "\n".join(tail))

"""Helpers of tests in several suites: the checkout's catalog copied for a test that edits it,
a Python subprocess that answers in JSON, the ``widehouse`` command run as a user would, an
environment without the session's settings, a stream group's batch writer with no Spark, and the
replay guard's files in memory."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def without_settings() -> dict[str, str]:
    """``os.environ`` without its ``WIDEHOUSE_*`` settings, but with the test session's mark
    (``WIDEHOUSE_TEST_SESSION``): what a subprocess starts stays the session's, reaped if it dies."""
    from widehouse.services.ownership import SESSION_VARIABLE

    return {k: v for k, v in os.environ.items() if not k.startswith("WIDEHOUSE_") or k == SESSION_VARIABLE}


def copy_catalog(dest: Path) -> Path:
    """Copy ``schemas/`` and ``sql/`` (which holds the catalog's offline SQL: loading checks those
    files exist beside it) into ``dest``; returns the copy's schemas dir."""
    shutil.copytree(ROOT / "schemas", dest / "schemas")
    shutil.copytree(ROOT / "sql", dest / "sql")
    return dest / "schemas"


def json_of_python(args: list[str], env: Mapping[str, str], stdin: str | None = None) -> Any:
    """Run ``python *args`` from the checkout's root (e.g. a probe that must not share this
    process's imports) and return the JSON its last line of output prints; its stderr on failure."""
    out = subprocess.run(
        [sys.executable, *args],
        input=stdin,
        cwd=ROOT,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_cli(*args: str, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m widehouse *args`` in this environment plus ``env``, as a user would run it."""
    return subprocess.run(
        [sys.executable, "-m", "widehouse", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=120,
        check=False,
    )


def batch_writer(state_dir: Path, sinks: tuple[str, ...] = ("clickhouse", "delta"), **fields: Any) -> Any:
    """A stream group's :class:`~widehouse.stream.spark.batch.BatchWriter` of the checkout's first
    topic, with no Spark session and no ClickHouse client (for tests of its own logic; each test
    stands in for what its subject calls)."""
    from tests.conftest import settings_for
    from widehouse.catalog import load_catalog
    from widehouse.stream.bronze import BronzeWriter
    from widehouse.stream.spark.batch import BatchWriter

    settings = settings_for(state_dir)
    catalog = load_catalog(settings.schemas_dir)
    return BatchWriter(
        spark=object(),  # type: ignore[arg-type]
        catalog=catalog,
        group="g001",
        topics=(str(catalog.topics[0].name),),
        app="app",
        checkpoint=str(state_dir / "checkpoint"),
        sinks=sinks,
        delta=settings.delta,
        clickhouse=object,  # type: ignore[arg-type]
        bronze=BronzeWriter(),
        **fields,
    )


class MemoryFiles:
    """The replay guard's file operations (:class:`widehouse.stream.replay_guard.RecordFiles`) on a
    dict (path -> text)."""

    def __init__(self) -> None:
        self.files: dict[str, str] = {}

    def read(self, path: str) -> str | None:
        return self.files.get(path)

    def write(self, path: str, text: str) -> None:
        self.files[path] = text

    def delete(self, path: str) -> None:
        self.files.pop(path, None)

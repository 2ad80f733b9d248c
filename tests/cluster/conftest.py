"""Fixtures of the cluster tests: a Spark standalone cluster on loopback and the artefact jobs ship.

``services`` here is Pulsar and ClickHouse only (below). ``spark_cluster`` (session) is

- the local cluster (``widehouse services up spark``: a master and one worker) in its own state
  dir, started for the session and stopped at its end; reused (and left running) when a master
  already answers on ``WIDEHOUSE_SPARK_MASTER_UI_PORT``;
- ``widehouse spark package``'s packed executor environment, built once per session into a
  temporary dir while the cluster starts (``WIDEHOUSE_TEST_SPARK_ARCHIVE`` reuses one already built);
- ``env``: the variables that point a job at both, with one core and a small executor per app (two
  slot groups run at once on the worker's two cores) and ``WIDEHOUSE_SHARED_PATHS=true`` (the
  loopback cluster shares the driver's disk).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import _running, settings_for
from widehouse.services import ServiceManager
from widehouse.services.spark_cluster import master_state
from widehouse.settings import LocalServicesSettings, Settings
from widehouse.spark import shipping

ROOT = Path(__file__).parents[2]
APP_CONF = "spark.cores.max=1;spark.executor.cores=1;spark.executor.memory=768m"
"""Per app: one core (two groups run at once on the worker's two), a small executor heap."""


@dataclass(frozen=True)
class SparkCluster:
    local: LocalServicesSettings
    archive: Path

    @property
    def env(self) -> dict[str, str]:
        return {
            "WIDEHOUSE_SPARK_MASTER": self.local.spark_master_url,
            "WIDEHOUSE_SPARK_ARCHIVE": str(self.archive),
            "WIDEHOUSE_SHARED_PATHS": "true",
            "WIDEHOUSE_SPARK_CONF": APP_CONF,
        }


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    """The cluster and the archive, built side by side."""
    box: dict[str, object] = {}

    def build() -> None:
        try:
            box["archive"] = _build(tmp_path_factory)
        except BaseException as exc:  # re-raised in the fixture's thread below
            box["error"] = exc

    builder = threading.Thread(target=build, daemon=True)
    builder.start()
    # four cores and 4 GiB on one worker: a stream, finalize and the daily merge run at once
    local = settings_for(
        tmp_path_factory.mktemp("cluster-state"),
        WIDEHOUSE_SPARK_WORKER_CORES="4",
        WIDEHOUSE_SPARK_WORKER_MEMORY="4g",
    ).local
    manager = ServiceManager(local)
    started: list[str] = []
    if isinstance(master_state(local), str):  # no master answers: start ours
        started = manager.up(["spark"])
    try:
        builder.join()
        if "error" in box:
            raise box["error"]  # type: ignore[misc]
        archive = box["archive"]
        assert isinstance(archive, Path)
        yield SparkCluster(local, archive)
    finally:
        manager.down(started)  # an empty list stops nothing


@pytest.fixture(scope="session")
def services(settings: Settings) -> Iterator[Settings]:
    """Pulsar and ClickHouse, started for the session where they do not answer yet (overrides
    tests/conftest.py's, which starts every service): only the daily merge of
    test_cluster_stream.py needs HBase, and starts it itself."""
    yield from _running(settings, ["pulsar", "clickhouse"])


@pytest.fixture(scope="session")
def cluster_env(spark_cluster: SparkCluster) -> dict[str, str]:
    return spark_cluster.env


def _build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get("WIDEHOUSE_TEST_SPARK_ARCHIVE")
    if given:
        return Path(given)
    built = shipping.package(ROOT, tmp_path_factory.mktemp("ship"), ROOT / "constraints.txt")
    assert built.archive is not None
    return built.archive

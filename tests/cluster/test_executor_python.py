"""Executors on the standalone cluster run the shipped environment, not the checkout's venv.

A job (a real driver process, as a user runs one) asks its tasks for ``sys.executable``,
``sys.prefix`` and where ``widehouse`` was imported from; all three must lie in the archive the
executor unpacked into its work dir, none in this checkout or its venv.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.cluster, pytest.mark.spark]

ROOT = Path(__file__).parents[2]

PROBE = """
import json, sys
from widehouse.settings import load_settings
from widehouse.spark.session import build_session

def where(batches):
    import os, sys, pyarrow as pa, widehouse
    for _ in batches:
        yield pa.RecordBatch.from_pydict(
            {"exe": [sys.executable], "prefix": [sys.prefix], "widehouse": [widehouse.__file__],
             "dirs": [os.environ.get("SPARK_EXECUTOR_DIRS", "")],
             "tool": [os.environ.get("JAVA_TOOL_OPTIONS", "")]})

spark = build_session(load_settings(), "widehouse-executor-python")
rows = spark.range(2, numPartitions=2).mapInArrow(
    where, "exe string, prefix string, widehouse string, dirs string, tool string").collect()
from pyspark import SparkFiles
driver = {"files": SparkFiles.getRootDirectory(),
          "tmpdir": spark.sparkContext._jvm.java.lang.System.getProperty("java.io.tmpdir")}
print(json.dumps({"driver": driver, "rows": [r.asDict() for r in rows]}))
spark.stop()
"""


@pytest.mark.usefixtures("metastore")  # the job's session uses the shared catalog, run alone too
def test_executors_run_the_shipped_environment(cluster_env: dict[str, str], tmp_path: Path) -> None:
    env = {**os.environ, "WIDEHOUSE_STATE_DIR": str(tmp_path / "state"), **cluster_env}
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    rows = seen["rows"]
    assert len(rows) == 2
    # the driver's unpacked archive (281 MB) and its fetched copy lie in its scratch in the state dir,
    # not /tmp, where a killed driver left them (widehouse.spark.scratch)
    scratch = Path(seen["driver"]["tmpdir"])
    assert scratch.parent == tmp_path / "state" / "spark" / "tmp" and scratch.name.startswith("driver-")
    assert Path(seen["driver"]["files"]).parent.parent == scratch, seen
    checkout_venv = Path(sys.prefix).resolve()
    for row in rows:
        exe, prefix, module = (Path(row[k]) for k in ("exe", "prefix", "widehouse"))
        for path in (exe, prefix, module):
            assert not path.resolve().is_relative_to(checkout_venv), row
            assert not path.resolve().is_relative_to(ROOT.resolve()), row
        # the archive unpacked by the executor as ./env in its work dir: <work>/app-*/<exec id>/env
        assert prefix.name == "env" and prefix.parent.parent.name.startswith("app-"), row
        assert exe.parent.parent == prefix, row
        assert module.is_relative_to(prefix), row
        # the executors' scratch: <service dir>/worker-N/local/spark-*/executor-*, emptied at each start
        executor_dir = Path(row["dirs"])
        assert executor_dir.parents[1].name == "local", row
        assert executor_dir.parents[2].name.startswith("worker-"), row
        # and the executor JVM's temp dir (its fetched copy of the archive) beside it
        assert f"-Djava.io.tmpdir={executor_dir.parents[1]}" in row["tool"], row

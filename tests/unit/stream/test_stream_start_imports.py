"""A `widehouse stream` process imports what its queries need while the JVM starts, not before.

Each check runs in a fresh interpreter: this test process has imported everything already."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HEAVY = (
    "pandas",
    "widehouse.stream.spark.batch",
    "widehouse.stream.spark.handover",
    "pyspark.sql.datasource",
)

_START = """
import json, sys
from widehouse.catalog import load_catalog
from widehouse.settings import load_settings
from widehouse.stream.options import GroupSpec, RunOptions
from widehouse.stream.spark import job

seen = {"after import": [m for m in json.loads(sys.argv[1]) if m in sys.modules]}
settings = load_settings()
topic = sorted(t.name for t in load_catalog(settings.schemas_dir).topics)[0]
app = job.StreamApp(settings, [GroupSpec("g001", (topic,))], RunOptions(available_now=True))


class Launch:  # the JVM's start: the session exists once it is joined
    def join(self):
        seen["at the launch's join"] = [m for m in job.QUERY_MODULES if m in sys.modules]
        app._spark = object()


app._launch_spark = Launch
job.warm_workers = lambda *a: None
app._start_all = lambda groups: None
app.start()
print(json.dumps(seen))
"""


def test_the_queries_modules_are_imported_while_the_jvm_starts(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "WIDEHOUSE_STATE_DIR": str(tmp_path / "state"),
        "WIDEHOUSE_STREAM_SINKS": "delta",  # no service: the bronze tables are made on local disk
        "WIDEHOUSE_DELTA_ROOT": str(tmp_path / "delta"),
        "WIDEHOUSE_STREAM_CHECKPOINT_ROOT": str(tmp_path / "checkpoints"),
    }
    command = [sys.executable, "-c", _START, json.dumps(HEAVY)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    # the module's import leaves them (~0.3 s) for later; start imports them before it waits
    assert seen["after import"] == []
    assert seen["at the launch's join"] == [
        "widehouse.stream.spark.batch",
        "widehouse.stream.spark.handover",
        "widehouse.stream.spark.source",
    ]

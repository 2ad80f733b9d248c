"""The supervisor hands the Pulsar token to the streams it starts without a command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from widehouse.errors import ConfigError
from widehouse.orchestration.launch import ClusterLauncher, LocalLauncher, driver_secret_properties
from widehouse.planner.io import plan_from_dict
from widehouse.settings import load_settings

TOKEN = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhcHAifQ.c2lnbmF0dXJl"

RECORDER = """\
import json, os, stat, sys
argv = sys.argv[1:]
seen = {"argv": argv}
if "--properties-file" in argv:
    path = argv[argv.index("--properties-file") + 1]
    seen["mode"] = stat.S_IMODE(os.stat(path).st_mode)
    seen["properties"] = open(path).read()
    seen["path"] = path
json.dump(seen, open(os.environ["RECORD_TO"], "w"))
"""


def test_a_cluster_submission_carries_the_token_in_a_private_file_only(tmp_path: Path) -> None:
    """spark-submit (a stand-in that records what it was given) sees the token only in a 0600
    properties file setting the driver's environment; the file is gone after the submission."""
    recorder = tmp_path / "spark-submit"
    recorder.write_text(f"#!{sys.executable}\n{RECORDER}")
    recorder.chmod(0o700)
    record = tmp_path / "seen.json"
    settings = load_settings(
        {
            "WIDEHOUSE_STATE_DIR": str(tmp_path / "state"),
            "WIDEHOUSE_SPARK_MASTER": "yarn",
            "WIDEHOUSE_SPARK_SUBMIT": str(recorder),
            "WIDEHOUSE_SUPERVISOR_MODE": "cluster",
        }
    )
    launcher = ClusterLauncher(
        settings,
        "hdfs:///wh/plan.json",
        "hdfs:///wh/stream_wide.py",
        env={"WIDEHOUSE_PULSAR_AUTH_TOKEN": TOKEN, "RECORD_TO": str(record)},
    )
    plan = plan_from_dict({"groups": [], "partitions": {}})
    launcher.start("g1", plan)
    seen = json.loads(record.read_text())
    assert not any(TOKEN in arg for arg in seen["argv"])
    assert seen["mode"] == 0o600
    assert seen["properties"] == (
        f"spark.yarn.appMasterEnv.WIDEHOUSE_PULSAR_AUTH_TOKEN={TOKEN}\n"
        f"spark.kubernetes.driverEnv.WIDEHOUSE_PULSAR_AUTH_TOKEN={TOKEN}\n"
    )
    assert "--load-spark-defaults" in seen["argv"]  # spark-defaults.conf still applies
    assert not Path(seen["path"]).exists()


def test_without_a_token_no_properties_file_is_passed() -> None:
    assert driver_secret_properties({"WIDEHOUSE_PULSAR_ADMIN_URL": "http://a:1"}) == ""
    with pytest.raises(ConfigError, match="WIDEHOUSE_PULSAR_AUTH_TOKEN holds a backslash"):
        driver_secret_properties({"WIDEHOUSE_PULSAR_AUTH_TOKEN": "a\\nb"})


def test_a_local_group_gets_the_token_in_its_environment_not_its_argv(tmp_path: Path) -> None:
    settings = load_settings({"WIDEHOUSE_STATE_DIR": str(tmp_path)})
    spec = LocalLauncher(settings, {"WIDEHOUSE_PULSAR_AUTH_TOKEN": TOKEN}).process("g1").spec
    assert spec.env["WIDEHOUSE_PULSAR_AUTH_TOKEN"] == TOKEN
    assert not any(TOKEN in arg for arg in spec.argv)

"""The local Airflow's SQLite metadata DB waits for locks instead of failing after sqlite3's 5 s."""

from __future__ import annotations

import importlib
from pathlib import Path

from widehouse.services.airflow import airflow_environment
from widehouse.settings import load_settings


def test_every_component_gets_the_connect_args_by_import_path(tmp_path: Path) -> None:
    settings = load_settings({"WIDEHOUSE_STATE_DIR": str(tmp_path)})
    keys = {"jwt_secret": "j", "secret_key": "s"}
    env = airflow_environment(settings.airflow, keys, tmp_path / "bin")
    module, _, name = env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS"].rpartition(".")
    args = getattr(importlib.import_module(module), name)  # what Airflow's conf.getimport does
    assert args == {"timeout": 60.0}

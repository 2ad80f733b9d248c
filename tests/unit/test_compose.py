"""docker/docker-compose.yml cannot run here (no Docker engine); check it is sound instead."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from widehouse.settings import VARIABLES, load_settings

ROOT = Path(__file__).parents[2]
COMPOSE = ROOT / "docker" / "docker-compose.yml"


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return dict(yaml.safe_load(COMPOSE.read_text()))


def app_env(compose: dict[str, Any]) -> dict[str, str]:
    env = compose["services"]["spark-master"]["environment"]
    return {k: str(v) for k, v in env.items()}


def test_has_the_production_like_services(compose: dict[str, Any]) -> None:
    services = set(compose["services"])
    assert {
        "pulsar", "clickhouse", "hbase", "hive-metastore", "spark-master", "spark-worker",
        "airflow-apiserver", "airflow-scheduler", "airflow-dag-processor",
    } <= services  # fmt: skip


def test_app_settings_are_known_variables_and_load(compose: dict[str, Any], tmp_path: Path) -> None:
    env = app_env(compose)
    known = {v.name for v in VARIABLES}
    assert set(env) <= known, set(env) - known
    settings = load_settings({**env, "WIDEHOUSE_STATE_DIR": str(tmp_path)})
    assert not settings.clickhouse.embedded
    assert not settings.spark.is_local
    assert settings.hive.metastore_uri is not None


def test_every_endpoint_the_code_uses_is_a_service(compose: dict[str, Any], tmp_path: Path) -> None:
    settings = load_settings({**app_env(compose), "WIDEHOUSE_STATE_DIR": str(tmp_path)})
    services = compose["services"]
    urls = {
        "pulsar service": settings.pulsar.service_url,
        "pulsar admin": settings.pulsar.admin_url,
        "clickhouse": settings.clickhouse.dsn,
        "hive metastore": settings.hive.metastore_uri or "",
        "spark master": settings.spark.master,
    }
    for what, url in urls.items():
        host = urlsplit(url).hostname
        assert host in services, f"{what} points at {host}, which is not a compose service"
    assert settings.hbase.host in services


def test_airflow_and_spark_share_the_widehouse_settings(compose: dict[str, Any]) -> None:
    reference = app_env(compose)
    for name in ("spark-worker", "airflow-scheduler", "airflow-apiserver", "airflow-dag-processor"):
        env = {k: str(v) for k, v in compose["services"][name]["environment"].items()}
        assert {k: env.get(k) for k in reference} == reference, name


def test_build_files_exist(compose: dict[str, Any]) -> None:
    for service in compose["services"].values():
        build = service.get("build")
        if build:
            assert (COMPOSE.parent / build["context"] / build["dockerfile"]).is_file()
    for volume_mount in compose["services"]["postgres"]["volumes"]:
        source = volume_mount.split(":")[0]
        if source.startswith("./"):
            assert (COMPOSE.parent / source).is_file()

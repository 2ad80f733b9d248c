"""docker/docker-compose.yml cannot run here (no Docker engine); check it is sound and safe instead.

Safe means: only the Airflow UI and ClickHouse's HTTP interface are published, on 127.0.0.1 unless
told otherwise; no password or secret is written in the file; every one is a required variable
(``${NAME:?message}``), so compose refuses to start without it. Compose's variable interpolation is
emulated here (:func:`interpolate`, written from the compose specification) to check that refusal
and to load the settings the containers would get.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from widehouse.settings import VARIABLES, load_settings

ROOT = Path(__file__).parents[2]
COMPOSE = ROOT / "docker" / "docker-compose.yml"
ENV_EXAMPLE = ROOT / "docker" / ".env.example"

REQUIRED = {
    "CLICKHOUSE_PASSWORD",
    "POSTGRES_PASSWORD",
    "HIVE_METASTORE_DB_PASSWORD",
    "AIRFLOW_JWT_SECRET",
    "AIRFLOW_API_SECRET_KEY",
    "AIRFLOW_ADMIN_PASSWORD",
}
PUBLISHED = {"airflow-apiserver": {"8082:8080"}, "clickhouse": {"8123:8123"}}
"""The only services a user opens, with their host:container ports."""
FAKE = {name: f"test-{name.lower().replace('_', '-')}" for name in REQUIRED}
SECRET_KEY = re.compile(r"PASSWORD|SECRET|TOKEN|_KEY$|JWT", re.IGNORECASE)
REQUIRED_REF = re.compile(r"\$\{([A-Z_][A-Z0-9_]*):\?[^}]+\}")
# a password in a URL's user info or in a -D...Password= option: a ${...} reference (whose message
# may hold spaces) or a literal
URL_PASSWORD = re.compile(r"://[^:/@\s]+:(\$\{[^}]*\}|[^@\s]*)@")
OPTION_PASSWORD = re.compile(r"password=(\$\{[^}]*\}|\S*)", re.IGNORECASE)

# -- compose's interpolation ---------------------------------------------------------------------

_REF = re.compile(
    r"\$(?:(?P<escaped>\$)"
    r"|\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>[^}]*))?\}"
    r"|(?P<named>[A-Za-z_][A-Za-z0-9_]*))"
)


class MissingVariableError(Exception):
    """What ``docker compose`` reports (and refuses to start on) for an unset required variable."""


def interpolate(text: str, env: Mapping[str, str]) -> str:
    """Compose's substitution: ``$$``, ``$X``, ``${X}``, ``${X:-d}``/``${X-d}`` (default when unset
    or empty / unset), ``${X:?m}``/``${X?m}`` (error when unset or empty / unset), ``${X:+a}``/
    ``${X+a}``."""

    def one(m: re.Match[str]) -> str:
        if m["escaped"]:
            return "$"
        name = m["braced"] or m["named"]
        op, arg = m["op"], m["arg"]
        value = env.get(name)
        if op in (":?", "?") and (value is None or (op == ":?" and value == "")):
            raise MissingVariableError(f"required variable {name} is missing a value: {arg}")
        if op in (":-", "-"):
            return arg if value is None or (op == ":-" and value == "") else value
        if op in (":+", "+"):
            return "" if value is None or (op == ":+" and value == "") else arg
        return value or ""

    return _REF.sub(one, text)


def interpolated(node: Any, env: Mapping[str, str]) -> Any:
    if isinstance(node, str):
        return interpolate(node, env)
    if isinstance(node, dict):
        return {k: interpolated(v, env) for k, v in node.items()}
    if isinstance(node, list):
        return [interpolated(v, env) for v in node]
    return node


def strings(node: Any) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [s for v in node.values() for s in strings(v)]
    if isinstance(node, list):
        return [s for v in node for s in strings(v)]
    return []


def env_example() -> dict[str, str]:
    pairs = [line.split("=", 1) for line in ENV_EXAMPLE.read_text().splitlines()]
    return {kv[0].strip(): kv[1].strip() for kv in pairs if len(kv) == 2 and not kv[0].startswith("#")}


# -- fixtures ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def raw() -> dict[str, Any]:
    """The file as written (YAML anchors merged, variables not substituted)."""
    return dict(yaml.safe_load(COMPOSE.read_text()))


@pytest.fixture(scope="module")
def compose(raw: dict[str, Any]) -> dict[str, Any]:
    """The file as compose runs it with every required secret set."""
    return dict(interpolated(raw, FAKE))


def app_env(compose: dict[str, Any]) -> dict[str, str]:
    env = compose["services"]["spark-master"]["environment"]
    return {k: str(v) for k, v in env.items()}


# -- what the stack holds ------------------------------------------------------------------------


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
    dsn = urlsplit(settings.clickhouse.dsn)
    assert (dsn.username, dsn.password) == ("widehouse", "test-clickhouse-password")


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


def test_airflow_loads_the_widehouse_view_from_the_source_tree_the_image_copies(
    compose: dict[str, Any],
) -> None:
    """The image copies ``spark/`` to /opt/widehouse/spark (docker/widehouse/Dockerfile)."""
    assert "COPY spark ./spark" in (ROOT / "docker" / "widehouse" / "Dockerfile").read_text()
    for name in ("airflow-scheduler", "airflow-apiserver", "airflow-dag-processor"):
        folder = compose["services"][name]["environment"]["AIRFLOW__CORE__PLUGINS_FOLDER"]
        assert folder.startswith("/opt/widehouse/"), name
        assert (ROOT / folder.removeprefix("/opt/widehouse/") / "widehouse_plugin.py").is_file(), name


def test_each_secret_is_the_same_on_both_sides_of_a_connection(compose: dict[str, Any]) -> None:
    services = compose["services"]
    clickhouse = urlsplit(app_env(compose)["WIDEHOUSE_CLICKHOUSE_DSN"])
    server = services["clickhouse"]["environment"]
    assert (clickhouse.username, clickhouse.password) == (
        server["CLICKHOUSE_USER"],
        server["CLICKHOUSE_PASSWORD"],
    )
    airflow_db = urlsplit(services["airflow-scheduler"]["environment"]["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"])
    postgres = services["postgres"]["environment"]
    assert (airflow_db.username, airflow_db.password) == (
        postgres["POSTGRES_USER"],
        postgres["POSTGRES_PASSWORD"],
    )
    # the Hive metastore logs in with the password the init script gave the hive user
    opts = services["hive-metastore"]["environment"]["SERVICE_OPTS"]
    assert "-Djavax.jdo.option.ConnectionUserName=hive" in opts
    assert f"-Djavax.jdo.option.ConnectionPassword={FAKE['HIVE_METASTORE_DB_PASSWORD']}" in opts.split()
    assert postgres["HIVE_METASTORE_DB_PASSWORD"] == FAKE["HIVE_METASTORE_DB_PASSWORD"]
    script = (COMPOSE.parent / "postgres" / "init-metastore.sh").read_text()
    assert "\\getenv hive_password HIVE_METASTORE_DB_PASSWORD" in script
    assert "CREATE USER hive WITH PASSWORD :'hive_password'" in script
    # one JWT secret and API key for every Airflow component; the init writes the admin's password
    # where the API server's auth manager reads it
    airflow = [n for n in services if n.startswith("airflow-")]
    for key in ("AIRFLOW__API_AUTH__JWT_SECRET", "AIRFLOW__API__SECRET_KEY"):
        assert {services[n]["environment"][key] for n in airflow} == {
            FAKE["AIRFLOW_JWT_SECRET" if "JWT" in key else "AIRFLOW_API_SECRET_KEY"]
        }
    passwords = services["airflow-init"]["environment"]["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"]
    assert services["airflow-init"]["environment"]["AIRFLOW_ADMIN_PASSWORD"] == FAKE["AIRFLOW_ADMIN_PASSWORD"]
    for name in ("airflow-init", "airflow-apiserver"):
        mounts = {v.split(":")[1] for v in services[name]["volumes"] if v.startswith("airflow-auth:")}
        assert mounts == {str(Path(passwords).parent)}, name


def test_build_files_exist(compose: dict[str, Any]) -> None:
    for service in compose["services"].values():
        build = service.get("build")
        if build:
            assert (COMPOSE.parent / build["context"] / build["dockerfile"]).is_file()
    for volume_mount in compose["services"]["postgres"]["volumes"]:
        source = volume_mount.split(":")[0]
        if source.startswith("./"):
            assert (COMPOSE.parent / source).is_file()
            if source.endswith(".sh"):  # the image runs an executable one, sources others
                assert os.access(COMPOSE.parent / source, os.X_OK), source


# -- safe to start -------------------------------------------------------------------------------


def test_only_the_airflow_ui_and_clickhouse_are_published_and_on_loopback(raw: dict[str, Any]) -> None:
    published: dict[str, set[str]] = {}
    for name, service in raw["services"].items():
        assert service.get("network_mode") != "host", name
        for port in service.get("ports", []):
            assert isinstance(port, str), f"{name}: long port syntax {port!r}; use HOST_IP:HOST:CONTAINER"
            bound = interpolate(port, {})  # the default, nothing set
            host_ip, _, ports = bound.partition(":")
            assert host_ip == "127.0.0.1", f"{name} publishes {port!r} on {host_ip or 'every interface'}"
            published.setdefault(name, set()).add(ports)
    assert published == PUBLISHED


def test_no_password_or_secret_is_written_in_the_file(raw: dict[str, Any]) -> None:
    assert "change-me" not in COMPOSE.read_text().lower()
    for name, service in raw["services"].items():
        for key, value in (service.get("environment") or {}).items():
            if SECRET_KEY.search(key) and not key.endswith("_FILE"):
                assert REQUIRED_REF.fullmatch(str(value)), f"{name}: {key}={value!r} is not ${{X:?...}}"
    seen = set()
    for text in strings(raw):
        for password in URL_PASSWORD.findall(text) + OPTION_PASSWORD.findall(text):
            ref = REQUIRED_REF.fullmatch(password)
            assert ref, f"a password written in {text!r}"
            seen.add(ref[1])
    # the scan found the DSN, the metadata DB URL and the metastore option
    assert seen == {"CLICKHOUSE_PASSWORD", "POSTGRES_PASSWORD", "HIVE_METASTORE_DB_PASSWORD"}


def test_every_secret_is_required_and_listed_in_the_env_example(raw: dict[str, Any]) -> None:
    refs = [m for text in strings(raw) for m in _REF.finditer(text) if not m["escaped"]]
    required = {m["braced"] for m in refs if m["op"] == ":?"}
    assert required == REQUIRED
    for m in refs:  # anything else has a default: nothing becomes empty silently
        assert m["op"] in (":?", ":-"), f"${m[0]} neither required nor defaulted"
        assert m["op"] == ":?" or not SECRET_KEY.search(m["braced"] or ""), m[0]
    example = env_example()
    assert set(example) == REQUIRED  # (the optional ones are comments there)
    assert set(example.values()) == {""}, "the example must hold no value, let alone a secret"


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_compose_refuses_to_start_without_each_secret(raw: dict[str, Any], name: str) -> None:
    for env in ({k: v for k, v in FAKE.items() if k != name}, {**FAKE, name: ""}):
        with pytest.raises(MissingVariableError, match=f"required variable {name} is missing"):
            interpolated(raw, env)


def test_the_env_example_as_copied_does_not_start(raw: dict[str, Any]) -> None:
    with pytest.raises(MissingVariableError):
        interpolated(raw, env_example())


def test_the_interpolation_follows_compose() -> None:
    """Cases from the compose specification's interpolation section, by hand."""
    env = {"SET": "v", "EMPTY": ""}
    assert interpolate("a$$b ${SET} $SET", env) == "a$b v v"
    assert interpolate("${EMPTY:-d} ${EMPTY-d} ${UNSET-d} ${UNSET:-d}", env) == "d  d d"
    assert interpolate("${SET:+a}|${EMPTY:+a}|${EMPTY+a}|${UNSET+a}", env) == "a||a|"
    assert interpolate("${EMPTY?m}", env) == ""
    for text in ("${EMPTY:?m}", "${UNSET:?m}", "${UNSET?m}"):
        with pytest.raises(MissingVariableError, match=r": m$"):
            interpolate(text, env)


def test_the_metastore_server_is_the_version_of_sparks_hive_client(compose: dict[str, Any]) -> None:
    """Spark's built-in Hive client is 2.3 (pyspark/jars); a Hive 4 server answers its get_table
    with "Invalid method name" (HIVE-26537), so the compose metastore runs Hive 2.3 from the same
    jars, over the 2.3.0 schema the Postgres init script creates (run by hand: Postgres 15, 55/55 calls)."""
    import importlib.util

    service = compose["services"]["hive-metastore"]
    assert "image" not in service or not str(service["image"]).startswith("apache/hive")
    assert service["build"] == compose["services"]["spark-master"]["build"]  # the widehouse image
    command = " ".join(service["command"])
    assert "org.apache.hadoop.hive.metastore.HiveMetaStore" in command
    assert "pyspark" in command and "/jars/*" in command and "/opt/widehouse/jdbc/*" in command
    spec = importlib.util.find_spec("pyspark")
    assert spec is not None and spec.submodule_search_locations
    jars = Path(next(iter(spec.submodule_search_locations))) / "jars"
    assert [p.name for p in jars.glob("hive-metastore-2.3.*.jar")]  # the server the command runs
    schema = COMPOSE.parent / "postgres" / "hive-schema-2.3.0.postgres.sql"
    assert "'2.3.0'" in schema.read_text()  # the VERSION row the server verifies
    mounts = " ".join(compose["services"]["postgres"]["volumes"])
    assert "hive-schema-2.3.0.postgres.sql" in mounts
    init = (COMPOSE.parent / "postgres" / "init-metastore.sh").read_text()
    assert "hive-schema-2.3.0.postgres.sql" in init and "SET ROLE hive" in init
    assert "-Dhive.metastore.schema.verification=true" in service["environment"]["SERVICE_OPTS"]
    assert "jdbc" in (COMPOSE.parent / "widehouse" / "Dockerfile").read_text()

"""Airflow Connections -> the ``WIDEHOUSE_*`` variables of :mod:`widehouse.settings`, at run time.

Precedence (as in Airflow's Spark provider): the settings' defaults < the task's environment < the
Connection. A Connection that is not defined leaves the environment alone, so a local run without
Airflow Connections uses the local services. Only :func:`overlay_from_airflow` touches Airflow, and
only inside a running task (never when a DAG file is parsed); it masks every secret it builds.

===========================  ==================================================================
Connection                   variables
===========================  ==================================================================
``widehouse_pulsar``         ``WIDEHOUSE_PULSAR_SERVICE_URL`` (``pulsar[+ssl]://host:port``, or
                             extra ``service_url``), ``WIDEHOUSE_PULSAR_ADMIN_URL`` (extra
                             ``admin_url``), ``WIDEHOUSE_PULSAR_AUTH_TOKEN`` (password)
``widehouse_clickhouse``     ``WIDEHOUSE_CLICKHOUSE_DSN`` = ``http(s)://login:password@host:port/
                             schema`` (extra ``secure: true`` for https; schema = database)
``widehouse_hbase``          ``WIDEHOUSE_HBASE_HOST``, ``WIDEHOUSE_HBASE_PORT``
===========================  ==================================================================
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from widehouse.contracts.identity import CLICKHOUSE_CONNECTION as CLICKHOUSE
from widehouse.contracts.identity import HBASE_CONNECTION as HBASE
from widehouse.contracts.identity import PULSAR_CONNECTION as PULSAR
from widehouse.errors import ConfigError

CONNECTION_IDS = (PULSAR, CLICKHOUSE, HBASE)


@dataclass(frozen=True)
class ConnectionFields:
    """The parts of an Airflow Connection we use (a plain value: no Airflow import needed)."""

    conn_id: str
    host: str | None = None
    port: int | None = None
    login: str | None = None
    password: str | None = field(default=None, repr=False)
    schema: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, conn_id: str, conn: Any) -> ConnectionFields:
        """The fields of an Airflow ``Connection`` (the task SDK's or the metadata DB's)."""
        return cls(
            conn_id=conn_id,
            host=conn.host,
            port=conn.port,
            login=conn.login,
            password=conn.password,
            schema=conn.schema,
            extra=conn.extra_dejson,
        )


@dataclass(frozen=True)
class Overlay:
    env: dict[str, str]
    secrets: tuple[str, ...]
    """Values to mask in logs (passwords, tokens, DSNs that carry a password)."""


def _need_host(conn: ConnectionFields) -> str:
    if not conn.host:
        raise ConfigError(f"Airflow connection {conn.conn_id!r} has no host")
    return conn.host


def _pulsar(conn: ConnectionFields) -> Overlay:
    env: dict[str, str] = {}
    secrets: list[str] = []
    service = conn.extra.get("service_url")
    if service:
        env["WIDEHOUSE_PULSAR_SERVICE_URL"] = str(service)
    elif conn.host:
        scheme = "pulsar+ssl" if conn.extra.get("tls") in (True, "true") else "pulsar"
        env["WIDEHOUSE_PULSAR_SERVICE_URL"] = f"{scheme}://{conn.host}:{conn.port or 6650}"
    if conn.extra.get("admin_url"):
        env["WIDEHOUSE_PULSAR_ADMIN_URL"] = str(conn.extra["admin_url"])
    if conn.password:
        env["WIDEHOUSE_PULSAR_AUTH_TOKEN"] = conn.password
        secrets.append(conn.password)
    return Overlay(env, tuple(secrets))


def _clickhouse(conn: ConnectionFields) -> Overlay:
    host = _need_host(conn)
    scheme = "https" if conn.extra.get("secure") in (True, "true") else "http"
    auth = ""
    if conn.login:
        auth = quote(conn.login, safe="")
        if conn.password:
            auth += ":" + quote(conn.password, safe="")
        auth += "@"
    path = f"/{conn.schema}" if conn.schema else ""
    dsn = f"{scheme}://{auth}{host}:{conn.port or 8123}{path}"
    secrets = (conn.password, quote(conn.password, safe=""), dsn) if conn.password else ()
    return Overlay({"WIDEHOUSE_CLICKHOUSE_DSN": dsn}, secrets)


def _hbase(conn: ConnectionFields) -> Overlay:
    env = {"WIDEHOUSE_HBASE_HOST": _need_host(conn)}
    if conn.port:
        env["WIDEHOUSE_HBASE_PORT"] = str(conn.port)
    return Overlay(env, ())


_MAPPERS: dict[str, Callable[[ConnectionFields], Overlay]] = {
    PULSAR: _pulsar,
    CLICKHOUSE: _clickhouse,
    HBASE: _hbase,
}


def overlay_from(connections: Mapping[str, ConnectionFields]) -> Overlay:
    """The ``WIDEHOUSE_*`` variables the given (defined) Connections stand for."""
    env: dict[str, str] = {}
    secrets: list[str] = []
    for conn_id in CONNECTION_IDS:
        if conn_id in connections:
            part = _MAPPERS[conn_id](connections[conn_id])
            env.update(part.env)
            secrets.extend(part.secrets)
    return Overlay(env, tuple(secrets))


def overlay_from_airflow() -> Overlay:
    """Look the Connections up in Airflow (inside a running task only) and mask their secrets."""
    from airflow.sdk import BaseHook
    from airflow.sdk.exceptions import AirflowNotFoundException
    from airflow.sdk.log import mask_secret

    found: dict[str, ConnectionFields] = {}
    for conn_id in CONNECTION_IDS:
        try:
            conn = BaseHook.get_connection(conn_id)
        except AirflowNotFoundException:  # not defined: this deployment uses the environment's values
            continue
        found[conn_id] = ConnectionFields.of(conn_id, conn)
    overlay = overlay_from(found)
    for secret in overlay.secrets:
        mask_secret(secret)
    return overlay

"""The Widehouse view in Airflow: a FastAPI app the Airflow 3 API server mounts (``fastapi_apps``),
and a navigation entry (``external_views``) that opens it; both declared by the plugin module
``airflow_plugins/widehouse_plugin.py``.

A plugin app mounted by the API server is not protected by Airflow on its own: every route here
depends on :func:`airflow.api_fastapi.core_api.security.get_user`, the dependency Airflow's own
routes use (a Bearer token or the UI's session cookie), so an anonymous request gets 401/403.

``?at=<ISO time>`` shows the warehouse as of a past moment (windows end there). Settings are read
per request (never at import): the API server's ``WIDEHOUSE_*`` environment,
overlaid with the ``widehouse_clickhouse`` Connection when Airflow defines one (as tasks do).
"""

from __future__ import annotations

import datetime as dt
import os
from typing import Any
from urllib.parse import quote

from fastapi import Depends, FastAPI, HTTPException
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse

from widehouse.operations.overview import as_json, overview
from widehouse.operations.page import DAILY_DAG, HOURLY_DAG, render

URL_PREFIX = "/widehouse"
RUN_DAGS: tuple[str, ...] = (HOURLY_DAG, DAILY_DAG)
"""The DAGs whose runs ``/run`` finds for a cell without a recorded Airflow run (it refuses any other)."""


def request_settings() -> Any:
    """Settings for one request: the environment, overlaid with the Airflow Connections if defined."""
    from airflow.models.connection import Connection
    from airflow.sdk.exceptions import AirflowNotFoundException  # what airflow.exceptions re-exports

    from widehouse.orchestration.connections import CONNECTION_IDS, ConnectionFields, overlay_from
    from widehouse.settings import load_settings

    found: dict[str, ConnectionFields] = {}
    for conn_id in CONNECTION_IDS:
        try:
            conn = Connection.get_connection_from_secrets(conn_id)
        except AirflowNotFoundException:  # not defined: the environment's values stand
            continue
        found[conn_id] = ConnectionFields.of(conn_id, conn)
    return load_settings({**os.environ, **overlay_from(found).env})


def parse_at(text: str | None) -> dt.datetime | None:
    """``?at=`` (ISO 8601, UTC if no offset): the warehouse as of then; None = now. 400 otherwise."""
    from widehouse.contracts.periods import PeriodError, parse_moment

    if not text:
        return None
    try:
        return parse_moment(text, "at")
    except PeriodError as exc:
        raise HTTPException(400, f"at={text!r} is not an ISO 8601 time (e.g. 2026-11-20T10:30Z)") from exc


def run_for(dag: str, when: dt.datetime) -> str | None:
    """The run id of ``dag``'s run logical-dated ``when`` (Airflow's metadata DB), or None."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        found = session.scalar(
            select(DagRun.run_id).where(DagRun.dag_id == dag, DagRun.logical_date == when).limit(1)
        )
    return str(found) if found is not None else None


def create_app() -> FastAPI:
    """The app (no settings read here: the plugin module builds it when the API server loads it)."""
    from airflow.api_fastapi.core_api.security import get_user

    app = FastAPI(title="Widehouse", dependencies=[Depends(get_user)])

    @app.get("/api/overview")
    def overview_json(at: str | None = None) -> JSONResponse:
        return JSONResponse(as_json(overview(request_settings(), parse_at(at))))

    @app.get("/", response_class=HTMLResponse)
    def page(at: str | None = None) -> HTMLResponse:
        return HTMLResponse(render(overview(request_settings(), parse_at(at))))

    @app.get("/run")
    def run(dag: str, period: str) -> RedirectResponse:
        """The link of a strip cell whose ledger row names no Airflow run (older rows, runs from a
        shell, unpublished periods; :func:`widehouse.operations.page.cell_link`): the Airflow run of
        ``dag`` whose logical date is the period (the hourly and daily DAGs' runs are logical-dated
        at the hour / day they publish), else the DAG's runs. Relative targets, so an API server
        under a base path works too."""
        if dag not in RUN_DAGS:
            raise HTTPException(400, f"dag={dag!r} is not one of {', '.join(RUN_DAGS)}")
        when = parse_at(period)
        run_id = run_for(dag, when) if when is not None else None
        target = f"../dags/{dag}/runs" + (f"/{quote(run_id, safe='')}" if run_id else "")
        return RedirectResponse(target, status_code=307)

    return app


__all__ = ["RUN_DAGS", "URL_PREFIX", "create_app", "parse_at", "request_settings", "run_for"]

"""The Widehouse view served by the real Airflow 3 API server (the plugin loaded from the plugins
folder ``widehouse airflow up`` configures), read by a logged-in client and by headless Chromium.

Only the API server component is started (the view needs no scheduler): a private state dir, ports,
metadata DB and ClickHouse database, seeded with the hand-written rows of
:mod:`tests.integration.operations_support`; every number below is worked out from those rows.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urljoin

import pytest
import requests

from tests.e2e.airflow_support import AirflowApi
from tests.e2e.browser_support import chromium, open_page
from tests.integration.operations_support import ISOLATED, REFINALIZE_RUN, T0, A, B, H, drop, ledger_row, seed
from widehouse.services.airflow import AirflowApiServer
from widehouse.services.manager import ServiceManager
from widehouse.settings import Settings, load_settings

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

AT = "2026-11-20T10:30:00Z"
ROOT = Path(__file__).parents[2]
ENV = {
    "WIDEHOUSE_AIRFLOW_PORT": "18380",
    "WIDEHOUSE_AIRFLOW_WORKER_LOG_PORT": "18393",
    "WIDEHOUSE_AIRFLOW_TRIGGERER_LOG_PORT": "18394",
}


@pytest.fixture(scope="module")
def deployment(services: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    """The API server with the Widehouse plugin, over a seeded private ClickHouse database."""
    root = tmp_path_factory.mktemp("airflow-view")
    database = f"it_view_{uuid.uuid4().hex[:8]}"
    # the view reads ClickHouse through the widehouse_clickhouse Connection, as tasks do
    conns = json.loads((ROOT / "docker" / "airflow" / "dev-connections.json").read_text())
    conns["widehouse_clickhouse"]["schema"] = database
    (root / "connections.json").write_text(json.dumps(conns))
    env = {
        **ENV,
        "WIDEHOUSE_STATE_DIR": str(root / "state"),
        "WIDEHOUSE_CLICKHOUSE_DATABASE": database,
        "WIDEHOUSE_AIRFLOW_CONNECTIONS_FILE": str(root / "connections.json"),
        "WIDEHOUSE_AIRFLOW_PASSWORD": secrets.token_urlsafe(12),
    }
    with pytest.MonkeyPatch.context() as mp:
        for name, value in env.items():  # the API server inherits the test's environment
            mp.setenv(name, value)
        settings = load_settings(os.environ)
        seed(settings)
        manager = ServiceManager(settings.local, [AirflowApiServer(settings.local, settings.airflow)])
        try:
            manager.up()
            yield settings
        finally:
            manager.down()
            drop(settings)


@pytest.fixture(scope="module")
def api(deployment: Settings) -> AirflowApi:
    assert deployment.airflow.password is not None
    return AirflowApi(deployment.airflow.url, deployment.airflow.user, deployment.airflow.password)


@pytest.fixture(scope="module")
def hourly_run(deployment: Settings, api: AirflowApi) -> str:
    """A run of widehouse_hourly logical-dated 05:00 (the DAGs parsed into the metadata DB by
    ``airflow dags reserialize``: no DAG processor runs here; no scheduler, so it stays queued)."""
    server = AirflowApiServer(deployment.local, deployment.airflow)
    done = subprocess.run(
        [sys.executable, "-m", "airflow", "dags", "reserialize"],
        env={**os.environ, **server.environment()},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    reply = api.session.post(
        f"{api.url}/api/v2/dags/widehouse_hourly/dagRuns",
        json={"logical_date": "2026-11-20T05:00:00Z", "conf": {}},
        timeout=60,
    )
    assert reply.status_code == 200, reply.text
    return str(reply.json()["dag_run_id"])


def add_ledger_row(settings: Settings, row: dict[str, Any]) -> None:
    import pyarrow as pa

    from widehouse import clickhouse
    from widehouse.contracts.tables import LEDGER_SHAPE

    client = clickhouse.connect(settings.clickhouse)
    try:
        client.insert(
            LEDGER_SHAPE.name,
            pa.Table.from_pylist([row], schema=LEDGER_SHAPE.arrow_schema()),
            uuid.uuid4().hex,
        )
    finally:
        client.close()


def bearer(api: AirflowApi) -> str:
    """The logged-in user's JWT (what the UI keeps in its ``_token`` cookie)."""
    return str(api.session.headers["Authorization"]).split()[1]


def view_url(settings: Settings, path: str = "/") -> str:
    return f"{settings.airflow.url}/widehouse{path}"


def test_anonymous_requests_are_refused(deployment: Settings) -> None:
    for path in ("/", f"/api/overview?at={AT}"):
        reply = requests.get(view_url(deployment, path), timeout=30, allow_redirects=False)
        assert reply.status_code in (401, 403), (path, reply.status_code, reply.text[:200])
        assert "g001" not in reply.text
    forged = requests.get(
        view_url(deployment, "/api/overview"), headers={"Authorization": "Bearer not-a-jwt"}, timeout=30
    )
    assert forged.status_code in (401, 403)


def test_plugin_and_navigation_entry_are_registered(api: AirflowApi) -> None:
    plugins = {p["name"]: p for p in api.get("/plugins")["plugins"]}
    view = plugins["widehouse"]
    assert [a["url_prefix"] for a in view["fastapi_apps"]] == ["/widehouse"]
    (entry,) = view["external_views"]
    assert (entry["name"], entry["href"], entry["destination"]) == ("Widehouse", "/widehouse/", "nav")
    assert entry["url_route"] == "widehouse" and entry["nav_top_level"] is True


def test_overview_numbers_match_the_hand_written_rows(deployment: Settings, api: AirflowApi) -> None:
    reply = api.session.get(view_url(deployment, f"/api/overview?at={AT}"), timeout=60)
    assert reply.status_code == 200, reply.text[:500]
    body: dict[str, Any] = reply.json()
    g, iso = body["groups"]
    assert (iso["name"], iso["state"], iso["alive"]) == ("iso-settings", "not started", False)
    assert (g["name"], g["state"], g["last_batch"], g["restarts"], g["failures"]) == (
        "g001",
        "alive",
        11,
        2,
        1,
    )
    assert g["watermark"] == "2026-11-20T10:00:00+00:00"
    assert g["lag"] == [[A, 40], [B, 7]]
    # 3,600 rows in hour 09 -> 1/s; 1,800 rows in the 30 minutes of hour 10 -> 1/s
    assert [p["events_per_s"] for p in g["points"]] == [1.0, 1.0]
    assert [p["freshness_s"] for p in g["points"]] == [4200.0, 1740.0]
    strips = {s["table"]: s for s in body["strips"]}
    hours = {c["period"][11:13]: c for c in strips["user_hourly"]["hours"][-8:]}
    assert {k: c["state"] for k, c in hours.items()} == {
        "03": "due",
        "04": "due",
        "05": "final",
        "06": "refinalized",
        "07": "mismatch",
        "08": "due",
        "09": "waiting",
        "10": "live",
    }
    assert hours["06"]["run_id"] == "r6b" and hours["05"]["rows"] == 42
    assert (hours["06"]["airflow_run"], hours["05"]["airflow_run"]) == (REFINALIZE_RUN, "")
    (a,) = body["rejections"]["topics"]
    assert (a["topic"], a["rows_in"], a["bad"], a["late"]) == (A, 2000, 40, 10)
    assert a["reasons"] == [["bad_json", 2], ["no_key", 1]]
    plan = {g["name"]: (g["load"], g["cores"], g["fill"]) for g in body["plan"]["groups"]}
    assert plan == {"g001": (14e6, 1, 0.5), "iso-settings": (56e6, 2, 1.0)}
    assert body["plan"]["isolated_topics"] == [ISOLATED]
    bad = requests.get(
        view_url(deployment, "/api/overview?at=yesterday"), timeout=30, headers=api.session.headers
    )
    assert bad.status_code == 400 and "yesterday" in bad.text


def test_page_with_the_ui_cookie_shows_no_secret(deployment: Settings, api: AirflowApi) -> None:
    token = bearer(api)
    reply = requests.get(view_url(deployment, f"/?at={AT}"), cookies={"_token": token}, timeout=60)
    assert reply.status_code == 200
    html = reply.text
    assert "g001" in html and "user_hourly" in html and "bad_json" in html
    assert "run?dag=widehouse_hourly&amp;period=" in html
    for secret in (deployment.local.clickhouse_password, deployment.airflow.password, token):
        assert secret and secret not in html


def test_strip_cells_link_to_the_airflow_run_of_their_period(
    deployment: Settings, api: AirflowApi, hourly_run: str
) -> None:
    html = requests.get(view_url(deployment, f"/?at={AT}"), cookies={"_token": bearer(api)}, timeout=60).text
    link = "run?dag=widehouse_hourly&amp;period=2026-11-20T05%3A00%3A00%2B00%3A00"
    assert f"<a href='{link}'>" in html
    url = view_url(deployment, "/" + link.replace("&amp;", "&"))
    found = api.session.get(url, allow_redirects=False, timeout=60)
    assert found.status_code == 307
    assert found.headers["location"] == f"../dags/widehouse_hourly/runs/{quote(hourly_run, safe='')}"
    # an hour with no run: the DAG's runs; a DAG the view does not link to: refused
    none = api.session.get(url.replace("T05", "T04"), allow_redirects=False, timeout=60)
    assert none.headers["location"] == "../dags/widehouse_hourly/runs"
    other = api.session.get(url.replace("widehouse_hourly", "widehouse_retire_app"), timeout=60)
    assert other.status_code == 400 and "widehouse_retire_app" in other.text


def test_a_cell_links_straight_to_the_airflow_run_its_ledger_row_names(
    deployment: Settings, api: AirflowApi, hourly_run: str
) -> None:
    """The ledger row of hour 01 names the REST-triggered run (as its finalize task would record
    it): the cell's link, resolved against the view's root, is that run's page in the Airflow UI."""
    add_ledger_row(
        deployment, ledger_row(T0 + 1 * H, T0 + 2 * H, "r1", 5, airflow_run=f"widehouse_hourly/{hourly_run}")
    )
    html = requests.get(view_url(deployment, f"/?at={AT}"), cookies={"_token": bearer(api)}, timeout=60).text
    link = f"../dags/widehouse_hourly/runs/{quote(hourly_run, safe='')}"
    assert f"<a href='{link}'>" in html
    page = urljoin(view_url(deployment, "/"), link)
    assert page == f"{deployment.airflow.url}/dags/widehouse_hourly/runs/{quote(hourly_run, safe='')}"
    assert api.session.get(page, timeout=60).status_code == 200  # the UI serves the run's route
    run = api.get(f"/dags/widehouse_hourly/dagRuns/{quote(hourly_run, safe='')}")
    assert run["dag_run_id"] == hourly_run  # the run the link names exists


@pytest.mark.skipif(
    chromium() is None, reason="no chromium (Debian: apt-get install chromium): browser test skipped"
)
def test_page_renders_in_headless_chromium(
    deployment: Settings, api: AirflowApi, tmp_path_factory: pytest.TempPathFactory
) -> None:
    token = bearer(api)
    out = tmp_path_factory.mktemp("artifacts")
    visit = open_page(view_url(deployment, f"/?at={AT}"), {"_token": token}, out / "profile")
    shot = out / "widehouse-view.png"
    shot.write_bytes(visit.screenshot)
    print(f"screenshot: {shot}")
    assert visit.status == 200
    assert visit.title == "Widehouse"
    assert visit.errors == []
    assert visit.screenshot.startswith(b"\x89PNG") and len(visit.screenshot) > 10_000
    anonymous = open_page(view_url(deployment, "/"), {}, out / "profile-anon")
    assert anonymous.status in (401, 403)
    # inside the Airflow UI: the navigation's Widehouse entry (body text; a frame's text is not the
    # body's) and the view in the UI's frame
    in_ui = open_page(
        f"{deployment.airflow.url}/plugin/widehouse",
        {"_token": token},
        out / "profile-ui",
        until="document.body.innerText.includes('Widehouse')"
        " && document.querySelector('iframe')?.contentDocument?.title === 'Widehouse'",
    )
    (out / "airflow-ui-widehouse.png").write_bytes(in_ui.screenshot)
    print(f"screenshot: {out / 'airflow-ui-widehouse.png'}")
    assert in_ui.until_met

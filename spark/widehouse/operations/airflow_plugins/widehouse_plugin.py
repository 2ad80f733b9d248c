"""Airflow plugin: the Widehouse view (an app the API server mounts at /widehouse, and a "Widehouse"
entry in the UI's navigation). ``widehouse airflow up`` points ``AIRFLOW__CORE__PLUGINS_FOLDER`` at
this folder; the app itself is :mod:`widehouse.operations.web` (it reads no settings at import)."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from widehouse.operations.web import URL_PREFIX, create_app


class WidehousePlugin(AirflowPlugin):
    name = "widehouse"
    fastapi_apps = [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "Widehouse"}]
    external_views = [
        {
            "name": "Widehouse",
            "href": f"{URL_PREFIX}/",
            "destination": "nav",
            "url_route": "widehouse",
            "nav_top_level": True,  # a button of its own in the left navigation, not under "Plugins"
        }
    ]

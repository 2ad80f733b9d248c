"""The warehouse at a glance: what operators read about the warehouse's health (no Spark, no Airflow).

:mod:`widehouse.operations.health` reads ClickHouse (``stream_progress``, ``stream_counts``,
``finalized_periods``, ``reconciliation``, ``quarantine``), the supervisor's state file and the plan,
with bounded queries (time windows and LIMITs), and returns plain dataclasses;
:mod:`widehouse.operations.page` renders them as one HTML page with inline SVG charts;
:mod:`widehouse.operations.web` serves both from the Airflow API server (the plugin in
``airflow_plugins/``), behind Airflow's login.
"""

"""The manual operations' trigger-form fields, as keyword arguments of Airflow's ``Param``.

Plain dicts (no Airflow import): the DAG file wraps each in ``Param(**spec)``. Enums come from the
catalog, so a new wide table shows in the forms without touching a DAG file.
"""

from __future__ import annotations

from typing import Any

from widehouse.catalog import Catalog

Spec = dict[str, Any]

HOUR_HELP = "UTC; any time inside the hour selects that hour"


def hourly_tables(catalog: Catalog) -> list[str]:
    return [t.name for t in catalog.wide_tables if t.grain == "hour"]


def daily_tables(catalog: Catalog) -> list[str]:
    return [t.name for t in catalog.wide_tables if t.grain == "day"]


def _flag(title: str, description: str, section: str) -> Spec:
    return {
        "default": False,
        "type": "boolean",
        "title": title,
        "description": description,
        "section": section,
    }


def _moment(title: str, description: str) -> Spec:
    return {
        "default": None,
        "type": ["null", "string"],
        "format": "date-time",
        "title": title,
        "description": description,
        "section": "Hours",
    }


def refinalize_params(catalog: Catalog) -> dict[str, Spec]:
    tables = hourly_tables(catalog)
    return {
        "table": {
            "default": tables[0] if tables else None,
            "type": "string",
            "enum": tables,
            "title": "Wide table",
            "description": "The hourly wide table to re-finalize (from the catalog).",
            "section": "What",
        },
        "first_hour": _moment("First hour", f"First hour to re-finalize ({HOUR_HELP})."),
        "last_hour": _moment(
            "Last hour", f"Last hour, inclusive ({HOUR_HELP}); empty = the first hour only."
        ),
        "include_late": _flag(
            "Include late events", "Fold the hours' rows from late_events into the final rows.", "Options"
        ),
        "accept_mismatch": _flag(
            "Accept a reconciliation mismatch",
            "Publish even if counts do not reconcile (recorded).",
            "Options",
        ),
        "force": _flag(
            "Force (ignore the watermark)",
            "Finalize even though a slot group's watermark is not past the hour (recorded as forced).",
            "Options",
        ),
    }


def rebuild_day_params() -> dict[str, Spec]:
    return {
        "day": {
            "default": None,
            "type": ["null", "string"],
            "format": "date",
            "title": "Day",
            "description": "UTC day to rebuild: offline aggregates -> HBase, then the extract to "
            "ClickHouse + Delta.",
            "section": "What",
        },
    }


def replan_params() -> dict[str, Spec]:
    def number(title: str, description: str, minimum: float, maximum: float | None = None) -> Spec:
        spec: Spec = {
            "default": None,
            "type": ["null", "number"],
            "minimum": minimum,
            "title": title,
            "description": description + " Empty = the WIDEHOUSE_PLAN_* setting.",
            "section": "Capacity overrides",
        }
        if maximum is not None:
            spec["maximum"] = maximum
        return spec

    return {
        "slot_capacity": number("Slot capacity (bytes/s per core)", "Load one core carries.", 1),
        "target_fill": number("Target fill", "Share of a core packed groups are planned to.", 0.01, 1),
        "isolation": number(
            "Isolation threshold", "Topics heavier than this share of a core run alone.", 0.01, 1
        ),
        "imbalance": number("Imbalance tolerated", "Drift tolerated before topics move.", 0),
        "apply_partitions": _flag(
            "Apply partitions", "Create or grow topic partitions in Pulsar to the planned counts.", "Pulsar"
        ),
    }


def retire_params() -> dict[str, Spec]:
    return {
        "group": {
            "default": "",
            "type": "string",
            "pattern": "^[a-z0-9][a-z0-9_-]{0,63}$",
            "title": "Slot group",
            "description": "The group whose app (<app>-<group>) is retired: stopped, and its Pulsar "
            "subscriptions removed now (its unread positions are lost).",
            "section": "What",
        },
    }

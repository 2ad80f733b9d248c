"""The manual operations' trigger-form fields, as keyword arguments of Airflow's ``Param``.

Plain dicts (no Airflow import): the DAG file wraps each in ``Param(**spec)``. Enums come from the
catalog, so a new wide table shows in the forms without touching a DAG file.

Airflow validates a trigger's conf against these JSON schemas (with jsonschema's ``FormatChecker``)
before it creates the run, from the UI's form and from ``POST /api/v2/dags/{id}/dagRuns`` alike, so
a spec refuses there whatever the task would refuse later:

- a field the task cannot do without has no ``default``: a trigger without it is refused;
- an hour is ``format: date-time``, which jsonschema enforces only when ``rfc3339-validator`` is
  importable (pinned in requirements.txt), and a ``pattern`` too: it holds without the validator,
  and it refuses the lower-case ``t``/``z`` RFC 3339 allows but the task's parser does not.
"""

from __future__ import annotations

from typing import Any

from widehouse.catalog import Catalog

Spec = dict[str, Any]

HOUR_HELP = "RFC 3339, e.g. 2026-11-22T09:00:00Z; any time inside the hour selects that hour"
DATE_TIME_PATTERN = (
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})$"
)
"""RFC 3339 ``date-time`` with upper-case ``T`` and ``Z`` (what the UI's date-time picker sends)."""


def hourly_tables(catalog: Catalog) -> list[str]:
    return [t.name for t in catalog.wide_tables if t.grain == "hour"]


def _flag(title: str, description: str, section: str) -> Spec:
    return {
        "default": False,
        "type": "boolean",
        "title": title,
        "description": description,
        "section": section,
    }


def _table(tables: list[str], description: str) -> Spec:
    """A wide table picked from ``tables`` (the first is the default)."""
    return {
        "default": tables[0] if tables else None,
        "type": "string",
        "enum": tables,
        "title": "Wide table",
        "description": description,
        "section": "What",
    }


def _moment(title: str, description: str, *, required: bool) -> Spec:
    spec: Spec = {
        "type": "string" if required else ["null", "string"],
        "format": "date-time",
        "pattern": DATE_TIME_PATTERN,
        "title": title,
        "description": description,
        "section": "Hours",
    }
    if not required:
        spec["default"] = None
    return spec


def refinalize_params(catalog: Catalog) -> dict[str, Spec]:
    return {
        "table": _table(hourly_tables(catalog), "The hourly wide table to re-finalize (from the catalog)."),
        "first_hour": _moment("First hour", f"First hour to re-finalize ({HOUR_HELP}).", required=True),
        "last_hour": _moment(
            "Last hour",
            f"Last hour, inclusive ({HOUR_HELP}); empty = the first hour only.",
            required=False,
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


def repair_params(catalog: Catalog) -> dict[str, Spec]:
    from widehouse.catalog import QUARANTINE_REASONS

    hourly = hourly_tables(catalog)  # first: the default
    tables = hourly + [t.name for t in catalog.wide_tables if t.name not in hourly]
    return {
        "table": _table(
            tables,
            "The wide table whose topics' quarantined events are re-parsed with the current catalog "
            "(fix the catalog first).",
        ),
        "first_hour": _moment(
            "First publish hour",
            f"First hour the quarantined messages were published in ({HOUR_HELP}).",
            required=True,
        ),
        "last_hour": _moment(
            "Last publish hour",
            f"Last hour, inclusive ({HOUR_HELP}); empty = the first hour only.",
            required=False,
        ),
        "topics": {
            "default": [],
            "type": "array",
            "items": {"type": "string"},
            "title": "Topics",
            "description": "Only these topics of the table, one per line (empty = all of them).",
            "section": "Which messages",
        },
        "reasons": {
            "default": [],
            "type": "array",
            "items": {"type": "string", "enum": list(QUARANTINE_REASONS)},
            "examples": list(QUARANTINE_REASONS),
            "title": "Quarantine reasons",
            "description": "Only messages the stream quarantined with these reasons (empty = any).",
            "section": "Which messages",
        },
        "republish": {
            **_flag(
                "Re-publish touched periods",
                "Finalize again every published period the repaired events fall in (with the flags of "
                "its last publication). Off: fold and record only.",
                "Options",
            ),
            "default": True,
        },
    }


def rebuild_day_params() -> dict[str, Spec]:
    return {
        "day": {
            "type": "string",
            "format": "date",
            "title": "Day",
            "description": "UTC day to rebuild (YYYY-MM-DD): offline aggregates -> HBase, then the "
            "extract to ClickHouse + Delta.",
            "section": "What",
        },
        "rewrite_stream": _flag(
            "Rewrite the stream family",
            "Write HBase family s even when the day's partials are what the last refresh read "
            "(only needed after partials were removed by hand).",
            "How",
        ),
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
        "force": _flag(
            "Force (plan from no traffic)",
            "Replace the plan in force even when no topic carries any traffic; without it such a "
            "replan is refused and the plan in force kept.",
            "Options",
        ),
    }


def retire_params() -> dict[str, Spec]:
    return {
        "group": {
            "type": "string",
            "pattern": "^[a-z0-9][a-z0-9_-]{0,63}$",
            "title": "Slot group",
            "description": "The group whose app (<app>-<group>) is retired: stopped, and its Pulsar "
            "subscriptions removed now (its unread positions are lost).",
            "section": "What",
        },
    }

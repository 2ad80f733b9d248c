"""The manual DAGs' trigger forms refuse, at trigger time, what their tasks would refuse later.

Validation runs through Airflow's own code on the real DAG files: the API server's path (the DAG
serialized and read back as the server holds it, then ``params.deep_merge(conf).validate()``, which
is what ``create_dagrun`` runs for the UI's form and for ``POST /api/v2/dags/{id}/dagRuns``) and
the worker's (``process_params``, which builds the params a task receives).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from widehouse.contracts import periods
from widehouse.errors import ConfigError
from widehouse.orchestration.params import DATE_TIME_PATTERN

ROOT = Path(__file__).parents[3]
UTC = dt.UTC


@pytest.fixture(scope="module")
def dags() -> dict[str, Any]:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags" / "widehouse_manual.py"))
    assert bag.import_errors == {}
    return dict(bag.dags)


@pytest.fixture(scope="module")
def served(dags: dict[str, Any]) -> dict[str, Any]:
    """The DAGs as the API server holds them (serialized, then read back)."""
    from airflow.serialization.serialized_objects import DagSerialization

    return {dag_id: DagSerialization.from_dict(DagSerialization.to_dict(d)) for dag_id, d in dags.items()}


def trigger(served: dict[str, Any], dag_id: str, conf: dict[str, Any]) -> dict[str, Any]:
    """What the API server checks before it creates a run (raises ParamValidationError)."""
    return dict(served[dag_id].params.deep_merge(conf).validate())


def task_params(dags: dict[str, Any], dag_id: str, conf: dict[str, Any]) -> dict[str, Any]:
    """The params the DAG's (only) task receives at run time."""
    from airflow.sdk.definitions.param import process_params

    dag = dags[dag_id]
    return dict(process_params(dag, dag.tasks[0], conf, suppress_exception=False))


BAD_HOURS = [
    "2026-11-22 9h",  # the report
    "2026-11-22 09:00:00Z",  # a space for the T
    "2026-11-22T09:00:00",  # no offset
    "2026-11-22T09:00Z",  # no seconds
    "2026-02-30T09:00:00Z",  # no such day: only RFC 3339's format check (the validator) sees it
    "2026-11-22T24:00:00Z",
    "2026-11-22t09:00:00z",  # RFC 3339 allows it, the task's parser does not: the pattern refuses
    "",
]


@pytest.mark.parametrize("hour", BAD_HOURS)
def test_an_hour_that_is_not_an_rfc3339_date_time_is_refused_at_trigger(
    served: dict[str, Any], hour: str
) -> None:
    from airflow.exceptions import ParamValidationError

    with pytest.raises(ParamValidationError, match="param first_hour"):
        trigger(served, "widehouse_refinalize", {"first_hour": hour})
    with pytest.raises(ParamValidationError, match="param last_hour"):
        trigger(served, "widehouse_refinalize", {"first_hour": "2026-11-22T09:00:00Z", "last_hour": hour})


def test_the_date_time_format_is_enforced_by_the_pinned_validator() -> None:
    """jsonschema checks ``date-time`` only with rfc3339-validator importable (requirements.txt)."""
    from jsonschema import FormatChecker

    assert "date-time" in FormatChecker().checkers
    assert not FormatChecker().conforms("2026-02-30T09:00:00Z", "date-time")


@pytest.mark.parametrize(
    ("first", "last", "hours"),
    [
        ("2026-11-22T09:00:00Z", None, ["2026-11-22T09:00:00+00:00"]),
        # what the UI's date-time picker sends (toISOString), inside the hour
        ("2026-11-22T09:30:00.000Z", None, ["2026-11-22T09:00:00+00:00"]),
        (
            "2026-11-22T17:00:00+08:00",
            "2026-11-22T11:59:59Z",
            ["2026-11-22T09:00:00+00:00", "2026-11-22T10:00:00+00:00", "2026-11-22T11:00:00+00:00"],
        ),
    ],
)
def test_a_valid_hour_is_accepted_and_reaches_the_task_as_that_hour(
    served: dict[str, Any], dags: dict[str, Any], first: str, last: str | None, hours: list[str]
) -> None:
    conf = {"first_hour": first, "last_hour": last}
    checked = trigger(served, "widehouse_refinalize", conf)
    assert (checked["first_hour"], checked["last_hour"], checked["table"]) == (first, last, "user_hourly")
    got = task_params(dags, "widehouse_refinalize", conf)
    start = periods.parse_moment(got["first_hour"], "param first_hour")
    end = periods.parse_moment(got["last_hour"], "param last_hour") if got["last_hour"] else start
    assert [h.isoformat() for h in periods.hours_between(start, end)] == hours


def test_missing_required_fields_are_refused_and_the_defaults_do_not_trigger(
    served: dict[str, Any],
) -> None:
    from airflow.exceptions import ParamValidationError

    with pytest.raises(ParamValidationError, match="param first_hour: No value passed"):
        trigger(served, "widehouse_refinalize", {})
    with pytest.raises(ParamValidationError, match="param first_hour"):
        trigger(served, "widehouse_refinalize", {"first_hour": None})
    with pytest.raises(ParamValidationError, match="param day: No value passed"):
        trigger(served, "widehouse_rebuild_day", {})
    with pytest.raises(ParamValidationError, match="param day"):
        trigger(served, "widehouse_rebuild_day", {"day": "2026-11-22 9h"})
    with pytest.raises(ParamValidationError, match="param group: No value passed"):
        trigger(served, "widehouse_retire_app", {})
    assert trigger(served, "widehouse_rebuild_day", {"day": "2026-11-22"}) == {
        "day": "2026-11-22",
        "rewrite_stream": False,
    }
    assert trigger(served, "widehouse_retire_app", {"group": "g007"}) == {"group": "g007"}
    # every replan field is optional (empty = the settings); force is off unless asked
    replan = trigger(served, "widehouse_replan_now", {})
    assert replan["force"] is False and replan["slot_capacity"] is None
    assert trigger(served, "widehouse_replan_now", {"force": True})["force"] is True


def test_the_served_form_shows_required_fields_without_a_value(served: dict[str, Any]) -> None:
    dumped = served["widehouse_refinalize"].params.get_param("first_hour").dump()
    assert dumped["value"] is None and dumped["schema"]["type"] == "string"
    assert served["widehouse_refinalize"].params.get_param("last_hour").dump()["schema"]["type"] == [
        "null",
        "string",
    ]


@settings(max_examples=150, deadline=None)
@given(hour=st.from_regex(DATE_TIME_PATTERN))
@example(hour="2026-11-22T09:00:00Z\n")  # the pattern's and RFC 3339's `$` both let it through
def test_every_hour_the_form_accepts_the_task_parses(served: dict[str, Any], hour: str) -> None:
    from airflow.exceptions import ParamValidationError

    try:
        trigger(served, "widehouse_refinalize", {"first_hour": hour})
    except ParamValidationError:
        return  # refused at trigger: never reaches the task
    try:
        moment = periods.parse_moment(hour, "param first_hour")
    except ConfigError as exc:
        pytest.fail(f"the form accepts {hour!r}, the task refuses it: {exc}")
    assert moment.tzinfo == UTC


def test_the_repair_form_refuses_a_reason_the_stream_never_gives_and_passes_the_rest(
    served: dict[str, Any], dags: dict[str, Any]
) -> None:
    from airflow.exceptions import ParamValidationError

    with pytest.raises(ParamValidationError, match="param first_hour: No value passed"):
        trigger(served, "widehouse_repair", {})
    with pytest.raises(ParamValidationError, match="param reasons"):
        trigger(served, "widehouse_repair", {"first_hour": "2026-11-22T09:00:00Z", "reasons": ["typo"]})
    conf = {"first_hour": "2026-11-22T09:00:00Z", "reasons": ["wrong_type"], "topics": []}
    assert trigger(served, "widehouse_repair", conf) == {
        "table": "user_hourly",
        "first_hour": "2026-11-22T09:00:00Z",
        "last_hour": None,
        "topics": [],
        "reasons": ["wrong_type"],
        "republish": True,
    }
    assert task_params(dags, "widehouse_repair", conf)["reasons"] == ["wrong_type"]

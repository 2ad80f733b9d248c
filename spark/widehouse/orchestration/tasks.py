"""The task bodies the DAG files call: Connections -> settings, then the light library or a job.

This is the only module of the library that talks to Airflow, and only inside running tasks
(imports are local): it reads Connections, turns non-retryable failures into
``AirflowFailException``, attaches Asset event extras, and passes the running DAG run to the jobs
that publish (``--airflow-run <dag id>/<run id>``, recorded in the ledger for the Widehouse view's
links). Everything it calls is tested without
Airflow.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

from widehouse.contracts import periods
from widehouse.contracts.identity import OFFLINE_DATABASE, group_app_id
from widehouse.errors import ConfigError, JobFailedError, OrchestrationError
from widehouse.orchestration import batch
from widehouse.orchestration.connections import overlay_from_airflow
from widehouse.orchestration.runner import run_widehouse
from widehouse.settings import Settings, load_settings

log = logging.getLogger(__name__)
T = TypeVar("T")


def task_env() -> dict[str, str]:
    """``WIDEHOUSE_*`` variables from the Airflow Connections (secrets masked)."""
    return overlay_from_airflow().env


def task_settings(env: Mapping[str, str]) -> Settings:
    return load_settings({**os.environ, **env})


def deployment_catalog(settings: Settings) -> Any:
    """The catalog the streams use (relocated to ``WIDEHOUSE_TENANT_SUFFIX`` when one is set)."""
    from widehouse.catalog import load_catalog

    catalog = load_catalog(settings.schemas_dir)
    suffix = settings.stream.tenant_suffix
    return catalog.relocated(suffix) if suffix else catalog


@contextmanager
def failing_fast() -> Iterator[None]:
    """A non-retryable job failure (bad input, mismatch) fails the task without retries."""
    try:
        yield
    except JobFailedError as exc:
        if exc.retryable:
            raise
        from airflow.sdk.exceptions import AirflowFailException

        raise AirflowFailException(str(exc)) from exc
    except ConfigError as exc:
        from airflow.sdk.exceptions import AirflowFailException

        raise AirflowFailException(str(exc)) from exc


def current_airflow_run() -> str:
    """The running task's DAG run as the ledger records it (``<dag id>/<run id>``,
    :func:`widehouse.contracts.identity.airflow_run_ref`); '' outside a running task."""
    from airflow.sdk import get_current_context

    from widehouse.contracts.identity import airflow_run_ref

    try:
        context = get_current_context()
    except RuntimeError:  # what the SDK raises when no task is running (a shell, a test)
        return ""
    run = context["dag_run"]
    return airflow_run_ref(str(run.dag_id), str(run.run_id))


def _with_env(body: Callable[[dict[str, str], Settings], T]) -> T:
    env = task_env()
    with failing_fast():
        return body(env, task_settings(env))


# -- streams --------------------------------------------------------------------------------------


def supervise_streams() -> dict[str, Any]:
    """One supervisor cycle; fails the task (with log tails) for groups it gave up on."""
    from widehouse.orchestration.supervisor import as_json, describe, from_settings
    from widehouse.planner import load_plan

    def body(env: dict[str, str], settings: Settings) -> dict[str, Any]:
        plan_path = settings.state_dir / "plan.json"
        if not plan_path.is_file():
            raise OrchestrationError(f"no plan at {plan_path}: run the replan DAG or `widehouse plan`")
        supervisor = from_settings(settings, env, run_widehouse)
        report = supervisor.cycle(load_plan(plan_path))
        log.info("supervisor cycle:\n%s", describe(report))
        if report.given_up:
            details = "\n\n".join(f"slot group {g}: {why}" for g, why in report.given_up.items())
            raise OrchestrationError(
                f"{len(report.given_up)} slot group(s) keep failing and are no longer restarted "
                f"(reset with `widehouse supervise --reset GROUP` once fixed):\n{details}"
            )
        return as_json(report)

    return _with_env(body)


def retire_group(group: str) -> None:
    """Stop a slot group that left the plan and remove its app's Pulsar subscriptions now."""
    from widehouse.orchestration.supervisor import from_settings
    from widehouse.planner import load_plan

    def body(env: dict[str, str], settings: Settings) -> None:
        plan_path = settings.state_dir / "plan.json"
        if plan_path.is_file() and group in {g.name for g in load_plan(plan_path).groups}:
            raise ConfigError(
                f"slot group {group!r} is in the current plan {plan_path}; replan it away first"
            )
        from_settings(settings, env, None).launcher.stop(group)
        from widehouse.orchestration.replan import catalog_namespaces

        namespaces = [a for ns in catalog_namespaces(settings) for a in ("--namespace", ns)]
        app = group_app_id(settings.stream.app, group)
        result = run_widehouse(["pulsar", "cleanup", "--retire", app, *namespaces], env)
        if result.code != 0:
            raise JobFailedError(f"pulsar cleanup --retire exited {result.code}:\n{result.tail}", result.code)

    _with_env(body)


def replan(overrides: Mapping[str, Any], apply: bool, force: bool = False, idle_skips: bool = False) -> str:
    """A new plan from live traffic, versioned; returns the version's path.

    A replan that saw no traffic keeps the plan in force and fails the task without retries (the
    manual DAG: trigger again with ``force``), or with ``idle_skips`` (the scheduled DAG, for which
    an idle pipeline is no fault) marks it skipped; the message says so either way."""
    from widehouse.orchestration.replan import NoTrafficError, knobs_with, versioned_replan

    def body(env: dict[str, str], settings: Settings) -> str:
        try:
            done = versioned_replan(settings, knobs_with(settings, overrides), apply=apply, force=force)
        except NoTrafficError as exc:
            from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

            raise (AirflowSkipException if idle_skips else AirflowFailException)(str(exc)) from exc
        log.info("new plan %s:\n%s", done.version, "\n".join(done.lines))
        return str(done.version)

    return _with_env(body)


# -- hours and days -------------------------------------------------------------------------------


def hour_is_ready(table: str, hour: dt.datetime) -> bool:
    """Sensor body: every group feeding ``table`` has a watermark past ``hour`` end + lateness."""

    def body(env: dict[str, str], settings: Settings) -> bool:
        catalog = deployment_catalog(settings)
        verdict = batch.check_gate(settings, catalog, table, hour)
        log.info("%s", verdict.message)
        return verdict.ready

    return _with_env(body)


def finalize(table: str, hours: list[dt.datetime], outlet: Any = None, **flags: bool) -> list[str]:
    """Finalize ``hours`` of ``table`` in order; the outlet's Asset event lists the hours done."""

    def body(env: dict[str, str], settings: Settings) -> list[str]:
        done: list[str] = []
        airflow_run = current_airflow_run()
        for hour in hours:
            batch.finalize_job(run_widehouse, env, table, hour, airflow_run=airflow_run, **flags)
            done.append(batch.hour_arg(hour))
        if outlet is not None:
            outlet.extra = {"table": table, "hours": done, **{k: v for k, v in flags.items() if v}}
        return done

    return _with_env(body)


def finalize_from_events(table: str, triggering_asset_events: Any, outlet: Any = None) -> list[str]:
    """Finalize the hours of ``table`` that the triggering watermark events name (none: nothing)."""
    from widehouse.orchestration.watermark_watch import hours_in_events

    extras = [e.extra for events in (triggering_asset_events or {}).values() for e in events]
    hours = hours_in_events(table, extras)
    if not hours:
        log.info("%s: the triggering events name no hour of this table", table)
        return []
    return finalize(table, hours, outlet)


def day_is_ready(day: dt.date) -> bool:
    """Sensor body: every hour of ``day`` is finalized and the day's Hive partitions exist."""
    from widehouse import clickhouse
    from widehouse.orchestration.params import hourly_tables

    def body(env: dict[str, str], settings: Settings) -> bool:
        catalog = deployment_catalog(settings)
        client = clickhouse.connect(settings.clickhouse)
        try:
            waiting = batch.unfinalized_hours(client, hourly_tables(catalog), day)
        finally:
            client.close()
        hive = sorted({h for t in catalog.wide_tables for s in t.offline for h in s.hive_tables})
        missing = batch.missing_hive_partitions(settings.hive.warehouse_dir, OFFLINE_DATABASE, hive, day)
        for table, hours in waiting.items():
            log.info("%s: %d hour(s) of %s not finalized, first %s", table, len(hours), day, hours[0])
        if missing:
            log.info("Hive partitions missing: %s", ", ".join(missing))
        return not waiting and not missing

    return _with_env(body)


def daily(day: dt.date, *, rewrite_stream: bool = False) -> None:
    def body(env: dict[str, str], settings: Settings) -> None:
        batch.daily_job(
            run_widehouse, env, day, rewrite_stream=rewrite_stream, airflow_run=current_airflow_run()
        )

    _with_env(body)


def form_hours(params: Mapping[str, Any]) -> tuple[dt.datetime, dt.datetime]:
    """A manual form's ``first_hour`` and ``last_hour`` (empty: the first); the form's date-times
    (``params.DATE_TIME_PATTERN``), any time inside an hour selects it. ConfigError naming the field."""
    first = periods.parse_moment(params.get("first_hour"), "param first_hour")
    if not params.get("last_hour"):
        return first, first
    return first, periods.parse_moment(params.get("last_hour"), "param last_hour")


def refinalize(params: Mapping[str, Any], outlet: Any = None) -> list[str]:
    """The manual re-finalize: a range of hours of one table, with its flags."""
    with failing_fast():
        hours = periods.hours_between(*form_hours(params))
    flags = {k: bool(params.get(k)) for k in ("include_late", "accept_mismatch", "force")}
    return finalize(str(params["table"]), hours, outlet, **flags)


def replan_now(params: Mapping[str, Any]) -> str:
    """The manual replan: the form's planner overrides and flags (:func:`replan`)."""
    overrides = {k: params.get(k) for k in ("slot_capacity", "target_fill", "isolation", "imbalance")}
    return replan(overrides, apply=bool(params.get("apply_partitions")), force=bool(params.get("force")))


def retire_app(params: Mapping[str, Any]) -> None:
    """The manual retirement of the form's slot group (:func:`retire_group`)."""
    retire_group(str(params["group"]))


def rebuild_day(params: Mapping[str, Any]) -> None:
    with failing_fast():
        day = periods.parse_day(params.get("day"), "param day")
    daily(day, rewrite_stream=bool(params.get("rewrite_stream")))


def repair(params: Mapping[str, Any]) -> None:
    """The manual repair: the form's table, publish hours, topics, reasons (``widehouse repair``)."""
    with failing_fast():
        first, last = form_hours(params)
        args = batch.repair_args(
            str(params["table"]),
            first,
            last,
            topics=[str(t).strip() for t in params.get("topics") or [] if str(t).strip()],
            reasons=[str(r) for r in params.get("reasons") or []],
            republish=bool(params.get("republish", True)),
            airflow_run=current_airflow_run(),
        )

    def body(env: dict[str, str], settings: Settings) -> None:
        batch.repair_job(run_widehouse, env, args)

    _with_env(body)

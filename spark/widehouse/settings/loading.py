"""Loading: resolve every variable (set value, else default) into :class:`Settings`; the local secrets."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from widehouse import private
from widehouse.contracts import values
from widehouse.errors import ConfigError
from widehouse.settings.config import _GROUPS, Settings
from widehouse.settings.declarations import Derived, Variable
from widehouse.settings.defaults import STATE
from widehouse.settings.parsers import parse_port
from widehouse.settings.table import _BY_NAME, DERIVED_FIELDS, VARIABLES


class _Resolver:
    """Resolves variables (set value, else default) once each, in dependency order."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self._environ = environ
        self._values: dict[str, Any] = {}
        self._resolving: set[str] = set()

    def raw(self, name: str) -> str | None:
        """The stripped text of an environment variable; None when unset or blank."""
        value = self._environ.get(name)
        if value is None:
            return None
        return value.strip() or None

    def value(self, name: str) -> Any:
        if name not in self._values:
            if name in self._resolving:  # a bug in the table, not user input
                raise RuntimeError(f"derived defaults form a cycle through {name}")
            self._resolving.add(name)
            self._values[name] = self._resolve(_BY_NAME[name])
            self._resolving.discard(name)
        return self._values[name]

    def scope(self, derived: Derived[Any]) -> dict[str, Any]:
        return {n: self.value(n) if n in _BY_NAME else self.raw(n) for n in derived.uses}

    def _resolve(self, var: Variable[Any]) -> Any:
        text = self.raw(var.name)
        if text is None and var.blank_is_value and var.name in self._environ:
            text = ""
        if text is not None:
            try:
                return var.parse(text)
            except (ValueError, ConfigError) as exc:
                reason = exc.problem if isinstance(exc, values.ValueTextError) else exc
                error = ConfigError(f"{var.shown(text)} is invalid: {reason}")
                if var.secret:  # the cause could quote the value: keep it out of tracebacks
                    raise error from None
                raise error from exc
        if not isinstance(var.default, Derived):
            return var.default
        try:
            return var.default.compute(self.scope(var.default))
        except (ValueError, ConfigError) as exc:
            raise ConfigError(
                f"{var.name} is not set and its default ({var.documented_default}) is invalid: {exc}; "
                f"set {var.name}"
            ) from exc


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """Build :class:`Settings` from ``WIDEHOUSE_*`` variables (``os.environ`` by default).

    Raises :class:`ConfigError` naming the variable (and its value, unless it is a secret) when one is
    invalid.
    """
    resolver = _Resolver(os.environ if environ is None else environ)
    leaves = {var.target: resolver.value(var.name) for var in VARIABLES}
    for derived in DERIVED_FIELDS:
        leaves[derived.target] = derived.default.compute(resolver.scope(derived.default))
    _check_distinct_ports(resolver)

    top: dict[str, Any] = {}
    groups: dict[str, dict[str, Any]] = {name: {} for name in _GROUPS}
    for target, value in leaves.items():
        group, _, leaf = target.partition(".")
        if leaf:
            groups[group][leaf] = value
        else:
            top[group] = value
    for group, build in _GROUPS.items():
        try:
            top[group] = build(**groups[group])
        except ConfigError as exc:  # a cross-field check of the group (planner: isolation <= fill)
            raise ConfigError(f"{_group_variables(group)} settings: {exc}") from exc
    return Settings(**top)


@dataclass(frozen=True)
class CreatedSecret:
    """A local password :func:`create_local_secrets` has just generated (report it once)."""

    variable: str
    """The variable that would have set it (``WIDEHOUSE_CLICKHOUSE_PASSWORD``)."""
    what: str
    path: Path
    value: str = field(repr=False)


LOCAL_SECRETS: dict[str, tuple[str, str]] = {
    private.CLICKHOUSE_PASSWORD: ("WIDEHOUSE_CLICKHOUSE_PASSWORD", "local ClickHouse password"),
    private.AIRFLOW_PASSWORD: ("WIDEHOUSE_AIRFLOW_PASSWORD", "local Airflow password"),
}
"""The passwords generated per state dir: file name -> (the variable that overrides it, what it is)."""


def create_local_secrets(
    names: tuple[str, ...], environ: Mapping[str, str] | None = None
) -> list[CreatedSecret]:
    """Generate the local passwords ``names`` (keys of :data:`LOCAL_SECRETS`) that neither their
    variable nor the state dir already holds; returns those it generated.

    Only the commands that start a local service call this (``widehouse services up``, ``widehouse
    airflow up``): loading settings never writes, so ``widehouse config``, DAG parsing and executors
    stay side-effect free. Load the settings again afterwards to see the new values.
    """
    resolver = _Resolver(os.environ if environ is None else environ)
    state_dir: Path = resolver.value(STATE)
    created: list[CreatedSecret] = []
    for name in names:
        variable, what = LOCAL_SECRETS[name]
        if resolver.raw(variable) is not None:  # an explicit value always wins: nothing to generate
            continue
        value, new = private.ensure_secret(state_dir, name)
        if new:
            created.append(CreatedSecret(variable, what, private.secret_path(state_dir, name), value))
    return created


def _group_variables(group: str) -> str:
    """``WIDEHOUSE_PLAN_*``: the common prefix of the variables of one settings group."""
    words = [v.name.split("_") for v in VARIABLES if v.target.startswith(f"{group}.")]
    common: list[str] = []
    for parts in zip(*words, strict=False):
        if len(set(parts)) != 1:
            break
        common.append(parts[0])
    return "_".join([*common, "*"])


def _check_distinct_ports(resolver: _Resolver) -> None:
    seen: dict[int, str] = {}
    for var in VARIABLES:
        if var.parse is not parse_port or not var.target.startswith(("local.", "airflow.")):
            continue
        port = resolver.value(var.name)
        if port in seen:
            raise ConfigError(
                f"{seen[port]} and {var.name} are both {port}; every local service port must differ"
            )
        seen[port] = var.name

"""Where a checkout keeps its local state and the JVM parts `make setup` resolves.

Only :mod:`widehouse.settings` should call these; everything else receives paths in config objects.
"""

from __future__ import annotations

from pathlib import Path


def source_root() -> Path | None:
    """The repository root when the package runs from a source checkout (editable install), else None."""
    here = Path(__file__).resolve()
    # <root>/spark/widehouse/paths.py
    candidate = here.parents[2]
    if (candidate / "pyproject.toml").is_file() and (candidate / "spark" / "widehouse").is_dir():
        return candidate
    return None


def default_state_dir() -> Path:
    root = source_root()
    if root is not None:
        return root / ".state"
    return Path.home() / ".local" / "state" / "widehouse"


def default_vendor_dir() -> Path:
    root = source_root()
    if root is not None:
        return root / ".vendor"
    return Path.home() / ".local" / "share" / "widehouse" / "vendor"


def default_schemas_dir() -> Path:
    root = source_root()
    if root is not None:
        return root / "schemas"
    return Path.cwd() / "schemas"


def default_dags_dir() -> Path:
    root = source_root()
    if root is not None:
        return root / "dags"
    return Path.cwd() / "dags"


def default_airflow_connections_file() -> Path | None:
    """The committed dev connections of a source checkout (docker/airflow/dev-connections.json)."""
    root = source_root()
    if root is not None:
        return root / "docker" / "airflow" / "dev-connections.json"
    return None

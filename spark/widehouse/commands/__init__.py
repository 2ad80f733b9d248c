"""CLI command groups. Each module exposes ``register(subparsers)``; add new ones to COMMANDS."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from widehouse.commands import (
    airflow_cmd,
    batch_cmd,
    catalog_cmd,
    config_cmd,
    demo_cmd,
    generate_cmd,
    hbase_cmd,
    plan_cmd,
    pulsar_cmd,
    repair_cmd,
    services_cmd,
    smoke_cmd,
    spark_cmd,
    sql_cmd,
    stream_cmd,
    supervise_cmd,
)

SubParsers = Any  # argparse._SubParsersAction is private; its type is not part of the API

COMMANDS: tuple[Callable[[SubParsers], None], ...] = (
    services_cmd.register,
    spark_cmd.register,
    config_cmd.register,
    smoke_cmd.register,
    plan_cmd.register,
    pulsar_cmd.register,
    catalog_cmd.register,
    generate_cmd.register,
    generate_cmd.register_offline,
    stream_cmd.register,
    batch_cmd.register,
    repair_cmd.register,
    hbase_cmd.register,
    sql_cmd.register,
    demo_cmd.register,
    airflow_cmd.register,
    supervise_cmd.register,
)

__all__ = ["COMMANDS", "SubParsers"]

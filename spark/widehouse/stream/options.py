"""What a streaming run is asked to do: slot groups, run options, injected faults (pyspark-free).

Shared by the ``widehouse stream`` command, the ``spark/jobs/stream_wide.py`` entrypoint, the demo
and the tests; :mod:`widehouse.stream.spark.job` runs them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from widehouse.errors import ConfigError


@dataclass(frozen=True)
class GroupSpec:
    """A slot group: its name (checkpoint, subscription and idempotency key) and its topics."""

    name: str
    topics: tuple[str, ...]


@dataclass(frozen=True)
class RunOptions:
    available_now: bool = False
    """Process what is in Pulsar now, then stop (tests, backfills, the demo's catch-up)."""
    duration_seconds: float | None = None
    """Stop cleanly after this long (None: run until SIGTERM)."""
    faults: tuple[Fault, ...] = ()
    starting_offsets: str = "earliest"


FAULT_POINTS = ("before-sinks", "clickhouse-insert", "after-clickhouse", "after-delta", "after-sinks")


@dataclass(frozen=True)
class Fault:
    """A deliberately injected failure (for the exactly-once tests): ``point@batch[:kill]``."""

    point: str
    batch_id: int
    kill: bool

    @classmethod
    def parse(cls, text: str) -> Fault:
        spec, _, how = text.partition(":")
        point, _, batch = spec.partition("@")
        if point not in FAULT_POINTS or not batch.isdigit() or how not in ("", "kill", "raise"):
            raise ConfigError(
                f"--fault {text!r}: expected <point>@<batch>[:kill|:raise] with point one of "
                f"{', '.join(FAULT_POINTS)}"
            )
        return cls(point, int(batch), how == "kill")


def groups_from_plan(plan_path: Path, names: list[str] | None) -> list[GroupSpec]:
    """Slot groups from a plan file: the named ones, or all of them when ``names`` is None."""
    from widehouse.planner import load_plan

    plan = load_plan(plan_path)
    chosen = [plan.group(n) for n in names] if names else list(plan.groups)
    return [GroupSpec(g.name, tuple(g.topics)) for g in chosen]

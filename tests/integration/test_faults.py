"""Short versions of the fault suite (``python -m bench faults``), each checked against the manifest.

Every scenario runs a live generator into its own topics, ClickHouse database and state dir, injects
its fault from this process, lets the app recover and drains; then both sinks must hold exactly the
manifest's rows: nothing lost, nothing duplicated. The live traffic ends as soon as its scenario has
recovered (the counts and durations below are upper bounds: a loaded box gets more, a quiet one
waits for nothing). ClickHouse and Pulsar faults use instances of their own on free ports (the
shared services are never touched).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from widehouse.settings import Settings
from widehouse.testing import fault_scenarios as scenarios

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]


def _exact(outcome: Any, injected: int) -> None:
    assert outcome.injected == injected, outcome.notes
    assert outcome.recoveries == injected, outcome.notes
    assert (outcome.lost, outcome.duplicated) == (0, 0), outcome.notes


def test_three_sigkills_at_random_moments_and_inside_a_delta_commit(
    services: Settings, spark: Any, tmp_path: Path
) -> None:
    _exact(scenarios.sigkills(tmp_path, spark, kills=3, rate=40, events=36_000), 3)


def test_the_clickhouse_service_killed_and_restarted_mid_stream(
    services: Settings, spark: Any, tmp_path: Path
) -> None:
    _exact(scenarios.clickhouse(tmp_path, spark, rate=20, events=0, outage_s=15, tail_s=585), 1)


def test_a_full_state_disk_fails_clearly_then_recovers(
    services: Settings, spark: Any, tmp_path: Path
) -> None:
    outcome = scenarios.disk_full(tmp_path, spark, rate=20, events=0, traffic_s=600)
    if outcome.injected == 0 and outcome.notes and outcome.notes[0].startswith("skipped"):
        pytest.skip(outcome.notes[0])
    assert any("'No space left on device': True" in n for n in outcome.notes), outcome.notes
    _exact(outcome, 1)


def test_the_pulsar_broker_killed_and_restarted_mid_stream(
    services: Settings, spark: Any, tmp_path: Path
) -> None:
    _exact(scenarios.pulsar(tmp_path, spark, events=2000), 1)

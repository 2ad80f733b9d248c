"""Test helpers the package ships (as Delta ships ``testing/utils.py``): used by the tests and the
benchmarks alike, so neither copies them. Not production code, and no test oracle: expected
results still come from hand-written data or an independent computation.

- :mod:`widehouse.testing.faults`: the fault suite's machinery (an isolated deployment, live
  traffic, the app as a process, read-back against the manifest);
- :mod:`widehouse.testing.fault_scenarios`: its scenarios, run by ``python -m bench faults`` and,
  in short versions, by ``tests/integration/test_faults.py``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import datetime as dt
    from pathlib import Path

    import pyarrow as pa

    from widehouse.catalog import Accepted, Catalog, Rejected
    from widehouse.generator.core import TrafficGenerator

PUBLISH_DELAY_MS = 1_500
"""How long after its event time each generated message counts as published."""


def generated_source_batch(
    catalog: Catalog, count: int, *, users: int, late_rate: float, bad_rate: float = 0.01
) -> pa.RecordBatch:
    """``count`` generated messages (``bad_rate`` of every bad class, ``late_rate`` late) whose event
    times start three hours before the current hour, as the Pulsar source emits them
    (:func:`source_batch`)."""
    import time

    from widehouse.contracts.periods import HOUR_MS
    from widehouse.generator.core import TrafficGenerator
    from widehouse.generator.options import GenerateOptions

    base = (int(time.time() * 1000) // HOUR_MS - 3) * HOUR_MS
    options = GenerateOptions(
        count=count, rate=0, base_time_ms=base, bad_rate=bad_rate, late_rate=late_rate, users=users
    )
    return source_batch(catalog, TrafficGenerator(catalog, options), base)


def source_batch(catalog: Catalog, generator: TrafficGenerator, base_ms: int) -> pa.RecordBatch:
    """Every message ``generator`` makes, as the Pulsar source emits them: ``value``, ``__topic``,
    ``__messageId`` (``<n>:0:0``) and ``__publishTime`` (event offset from ``base_ms`` plus
    :data:`PUBLISH_DELAY_MS`)."""
    import pyarrow as pa

    values: list[bytes] = []
    topics: list[str] = []
    ids: list[str] = []
    publish: list[int] = []
    for chunk in generator.chunks():
        for t, payload, offset in zip(chunk.topics, chunk.payloads, chunk.offsets_ms, strict=True):
            values.append(payload)
            topics.append(str(catalog.topics[t].name))
            ids.append(f"{len(ids)}:0:0")
            publish.append((base_ms + offset + PUBLISH_DELAY_MS) * 1000)
    return pa.RecordBatch.from_pydict(
        {
            "value": pa.array(values, pa.binary()),
            "__topic": topics,
            "__messageId": ids,
            "__publishTime": pa.array(publish, pa.timestamp("us", tz="UTC")),
        }
    )


def reference_verdicts(
    catalog: Catalog, batch: pa.RecordBatch
) -> Iterator[tuple[str, bytes, dt.datetime, Accepted | Rejected]]:
    """Each message of a source batch (``value``, ``__topic``, ``__publishTime``), in order, through
    the catalog's reference parser one at a time: ``(topic, payload, publish time, verdict)``."""
    from widehouse.catalog import parse_event

    for payload, topic, publish in zip(
        batch["value"].to_pylist(),
        batch["__topic"].to_pylist(),
        batch["__publishTime"].to_pylist(),
        strict=True,
    ):
        publish_ms = round(publish.timestamp() * 1000)
        verdict = parse_event(
            catalog.topic(topic), payload, publish_ms, catalog.rules, catalog.max_payload_bytes
        )
        yield topic, payload, publish, verdict


def reference_rows(
    catalog: Catalog, batch: pa.RecordBatch
) -> dict[str, dict[tuple[Any, int], dict[str, Any]]]:
    """The wide rows a source batch must produce, per table, computed the slow way (one event at a
    time through the catalog's reference parser and aggregation): the oracle for tests and benches."""
    from widehouse.catalog import Accepted
    from widehouse.catalog.semantics.fold import aggregate

    events = [
        (catalog.topic(topic), verdict.key, verdict.event_ms, verdict.row)
        for topic, _, _, verdict in reference_verdicts(catalog, batch)
        if isinstance(verdict, Accepted) and not verdict.late
    ]
    return aggregate(catalog, events)


def stream_command(plan: Path, *args: str) -> list[str]:
    """``widehouse stream --plan <plan> --all-groups ARGS`` in this interpreter, as a subprocess's argv."""
    return [sys.executable, "-m", "widehouse", "stream", "--plan", str(plan), "--all-groups", *args]


__all__ = ["PUBLISH_DELAY_MS", "source_batch", "stream_command"]

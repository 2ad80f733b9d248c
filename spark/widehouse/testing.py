"""Test helpers the package ships (as Delta ships ``testing/utils.py``): used by the tests and the
benchmarks alike, so neither copies them. Not production code, and no test oracle: expected
results still come from hand-written data or an independent computation.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    import pyarrow as pa

    from widehouse.catalog import Catalog
    from widehouse.generator.core import TrafficGenerator

PUBLISH_DELAY_MS = 1_500
"""How long after its event time each generated message counts as published."""


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


def stream_command(plan: Path, *args: str) -> list[str]:
    """``widehouse stream --plan <plan> --all-groups ARGS`` in this interpreter, as a subprocess's argv."""
    return [sys.executable, "-m", "widehouse", "stream", "--plan", str(plan), "--all-groups", *args]


__all__ = ["PUBLISH_DELAY_MS", "source_batch", "stream_command"]

"""Throughput and freshness of a streaming run, from its progress rows (ClickHouse or Delta).

Freshness of a message is the time from its publish to the commit of the micro-batch that wrote it
to every sink. Progress rows keep, per topic and batch, the commit time and the range of publish
times; messages are taken as spread evenly over that range (exact for steady traffic, an
approximation for bursts), so percentiles need no per-message log.
"""

from __future__ import annotations

import datetime as dt
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

Row = Mapping[str, Any]


@dataclass(frozen=True)
class RunFigures:
    messages: int
    batches: int
    wall_seconds: float
    """From the first data batch's planning time to the last commit."""
    batch_seconds: float
    """Time spent inside micro-batches (sum of their durations)."""
    freshness_p50: float
    freshness_p95: float

    @property
    def wall_rate(self) -> float:
        return self.messages / max(self.wall_seconds, 1e-3)

    @property
    def batch_rate(self) -> float:
        return self.messages / max(self.batch_seconds, 1e-3)


def _seconds(a: dt.datetime, b: dt.datetime) -> float:
    return (a - b).total_seconds()


def freshness(topic_rows: Iterable[Row], per_row: int = 50) -> list[float]:
    """Sorted freshness samples (seconds), weighted by each topic-batch's message count."""
    samples: list[float] = []
    for r in topic_rows:
        if not r["rows_in"] or r["min_publish_time"] is None or r["max_publish_time"] is None:
            continue
        n = min(int(r["rows_in"]), per_row)
        weight = max(1, round(int(r["rows_in"]) / n))
        newest = _seconds(r["committed_at"], r["max_publish_time"])
        oldest = _seconds(r["committed_at"], r["min_publish_time"])
        samples += [newest + (oldest - newest) * (i + 0.5) / n for i in range(n) for _ in range(weight)]
    return sorted(samples)


def percentile(sorted_samples: list[float], q: float) -> float:
    if not sorted_samples:
        return float("nan")
    return sorted_samples[min(len(sorted_samples) - 1, int(q * (len(sorted_samples) - 1) + 0.5))]


def figures(group_rows: Iterable[Row], topic_rows: Iterable[Row]) -> RunFigures:
    """Figures of a run from its progress rows: group rows (topic ``*``) and topic rows."""
    busy = [b for b in group_rows if b["rows_in"]]
    if not busy:
        return RunFigures(0, 0, 0.0, 0.0, float("nan"), float("nan"))
    samples = freshness(topic_rows)
    return RunFigures(
        messages=sum(int(b["rows_in"]) for b in busy),
        batches=len(busy),
        wall_seconds=_seconds(max(b["committed_at"] for b in busy), min(b["batch_time"] for b in busy)),
        batch_seconds=sum(int(b["duration_ms"]) for b in busy) / 1000,
        freshness_p50=statistics.median(samples) if samples else float("nan"),
        freshness_p95=percentile(samples, 0.95),
    )

"""The traffic model: which topic and user each message has, and when it is due.

- Topics: the catalog's traffic weights, or Zipf(``topic_skew``) over topics ranked by weight.
- Users: Zipf(``user_skew``) over user indexes (index 0 the most active).
- Time: message ``i`` is due ``offset_ms(i)`` after the start at a constant rate, ``burst_factor``
  times faster during the first ``burst_length_s`` of every ``burst_every_s`` window.

All draws come from one ``numpy.random.Generator`` seeded by the options, in fixed-size chunks,
so the same options give the same messages.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from widehouse.catalog.model import Topic
from widehouse.generator.options import GenerateOptions


def topic_weights(topics: list[Topic], skew: float | None) -> npt.NDArray[np.float64]:
    """Normalized traffic shares of ``topics`` (in the given order)."""
    if skew is None:
        raw = np.array([t.traffic.weight for t in topics], dtype=np.float64)
    else:
        ranked = sorted(range(len(topics)), key=lambda i: (-topics[i].traffic.weight, str(topics[i].origin)))
        raw = np.empty(len(topics), dtype=np.float64)
        for rank, index in enumerate(ranked, start=1):
            raw[index] = 1.0 / rank**skew
    shares: npt.NDArray[np.float64] = raw / raw.sum()
    return shares


def zipf_cdf(n: int, skew: float) -> npt.NDArray[np.float64]:
    """Cumulative Zipf probabilities over ``n`` ranks (uniform for skew 0)."""
    weights = 1.0 / np.arange(1, n + 1, dtype=np.float64) ** skew
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    cdf[-1] = 1.0
    return cdf


class Timeline:
    """Due times of messages under a constant rate with periodic bursts."""

    def __init__(self, options: GenerateOptions) -> None:
        self.rate = options.rate
        self.bursty = options.burst_factor > 1 and options.rate > 0
        self.every_ms = options.burst_every_s * 1000.0
        self.burst_ms = options.burst_length_s * 1000.0
        self.fast = options.rate * options.burst_factor
        # messages sent in one window: burst part, then the normal part
        self.in_burst = self.fast * options.burst_length_s
        self.per_window = self.in_burst + options.rate * (options.burst_every_s - options.burst_length_s)

    def offsets_ms(self, indexes: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Due time of each message index, in ms after the start."""
        if self.rate <= 0:
            return np.zeros(len(indexes), dtype=np.int64)
        if not self.bursty:
            return (indexes * (1000.0 / self.rate)).astype(np.int64)
        window = np.floor(indexes / self.per_window)
        rest = indexes - window * self.per_window
        inside = rest < self.in_burst
        offset = np.where(
            inside,
            rest / self.fast * 1000.0,
            self.burst_ms + (rest - self.in_burst) / self.rate * 1000.0,
        )
        return (window * self.every_ms + offset).astype(np.int64)

    def count_for(self, duration_s: float) -> int:
        """How many messages fall due within ``duration_s``."""
        if not self.bursty:
            return max(1, math.floor(self.rate * duration_s))
        windows, rest_s = divmod(duration_s * 1000.0, self.every_ms)
        rest_s /= 1000.0
        burst_s = min(rest_s, self.burst_ms / 1000.0)
        tail = self.fast * burst_s + self.rate * max(0.0, rest_s - burst_s)
        return max(1, math.floor(windows * self.per_window + tail))

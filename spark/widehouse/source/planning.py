"""Cutting one micro-batch (or batch read) into Spark tasks.

A **slice** is the range ``(start, end]`` of one topic-partition, with its exact message count.
Small slices are grouped into one task (each needs its own reader, so a task holds at most
``max_slices`` of them); a slice much bigger than the per-task share is split at exact message
positions (found by the broker index, so the split is deterministic: the same ``(start, end)``
always gives the same tasks). Tasks are balanced greedily by message count (largest first).

Pure: splitting asks a ``split`` callback for the boundary marks.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from widehouse.pulsar.positions import Mark, TopicPartition


@dataclass(frozen=True)
class Slice:
    """Messages of one topic-partition after ``start`` up to and including ``end``."""

    topic: str
    partition: int
    start: Mark
    end: Mark

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def count(self) -> int:
        return self.end.index - self.start.index


@dataclass(frozen=True)
class ReadTask:
    """What one Spark task reads: slices, each through its own reader."""

    slices: tuple[Slice, ...]

    @property
    def messages(self) -> int:
        return sum(s.count for s in self.slices)


Splitter = Callable[[Slice, list[int]], list[Mark]]
"""Given a slice and target indexes strictly inside it, the marks at those indexes."""


def split_slice(piece: Slice, parts: int, locate: Splitter) -> list[Slice]:
    """``piece`` cut into ``parts`` slices of nearly equal counts."""
    if parts <= 1 or piece.count < 2:
        return [piece]
    parts = min(parts, piece.count)
    targets = [piece.start.index + piece.count * k // parts for k in range(1, parts)]
    marks = locate(piece, targets)
    bounds = [piece.start, *marks, piece.end]
    return [Slice(piece.topic, piece.partition, bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1)]


def plan_tasks(
    slices: Sequence[Slice],
    messages_per_task: int,
    max_slices: int = 256,
    min_tasks: int = 1,
    locate: Splitter | None = None,
) -> list[ReadTask]:
    """Group and split ``slices`` into balanced tasks (see the module docstring)."""
    pieces = [s for s in slices if s.count > 0]
    if not pieces:
        return []
    total = sum(s.count for s in pieces)
    n_tasks = max(min_tasks, math.ceil(total / messages_per_task), math.ceil(len(pieces) / max_slices))
    share = max(1, math.ceil(total / n_tasks))
    if locate is not None:
        cut: list[Slice] = []
        for piece in pieces:
            if piece.count > share * 3 // 2:
                cut.extend(split_slice(piece, math.ceil(piece.count / share), locate))
            else:
                cut.append(piece)
        pieces = cut
    n_tasks = max(n_tasks, math.ceil(len(pieces) / max_slices))
    n_tasks = min(n_tasks, len(pieces))
    # largest first onto the least loaded task that still has room for a slice
    order = sorted(pieces, key=lambda s: (-s.count, s.topic, s.partition, s.start.index))
    heap: list[tuple[int, int, int]] = [(0, 0, i) for i in range(n_tasks)]  # (messages, slices, task)
    buckets: list[list[Slice]] = [[] for _ in range(n_tasks)]
    for piece in order:
        skipped = []
        while True:
            messages, count, task = heapq.heappop(heap)
            if count < max_slices or not heap:
                break
            skipped.append((messages, count, task))
        buckets[task].append(piece)
        heapq.heappush(heap, (messages + piece.count, count + 1, task))
        for item in skipped:
            heapq.heappush(heap, item)
    tasks = []
    for bucket in buckets:
        if bucket:
            bucket.sort(key=lambda s: (s.topic, s.partition, s.start.index))
            tasks.append(ReadTask(tuple(bucket)))
    tasks.sort(key=lambda t: (t.slices[0].topic, t.slices[0].partition, t.slices[0].start.index))
    return tasks

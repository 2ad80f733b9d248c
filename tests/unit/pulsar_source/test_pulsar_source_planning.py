"""Cutting a batch into tasks: small slices grouped, big ones split exactly, balanced."""

from __future__ import annotations

import itertools

from widehouse.pulsar.positions import Mark, Position
from widehouse.source.planning import Slice, plan_tasks, split_slice


def piece(topic: str, count: int, start: int = 0, partition: int = -1) -> Slice:
    return Slice(
        topic, partition, Mark(Position(1, start), start), Mark(Position(1, start + count), start + count)
    )


def fake_locate(s: Slice, targets: list[int]) -> list[Mark]:
    return [Mark(Position(1, t), t) for t in targets]


def test_small_slices_share_a_task() -> None:
    tasks = plan_tasks([piece(f"t{i}", 10) for i in range(50)], messages_per_task=1000)
    assert len(tasks) == 1 and len(tasks[0].slices) == 50 and tasks[0].messages == 500


def test_slices_per_task_are_bounded() -> None:
    tasks = plan_tasks([piece(f"t{i}", 1) for i in range(10)], messages_per_task=1000, max_slices=4)
    assert [len(t.slices) for t in tasks] == [4, 3, 3] or sorted(len(t.slices) for t in tasks) == [3, 3, 4]
    assert sum(t.messages for t in tasks) == 10


def test_a_big_slice_is_split_at_exact_marks() -> None:
    tasks = plan_tasks([piece("big", 1000), piece("small", 10)], messages_per_task=300, locate=fake_locate)
    parts = sorted((s for t in tasks for s in t.slices if s.topic == "big"), key=lambda s: s.start.index)
    assert sum(s.count for s in parts) == 1000 and len(parts) >= 3
    for left, right in itertools.pairwise(parts):
        assert left.end == right.start  # contiguous: nothing lost, nothing read twice
    assert parts[0].start.index == 0 and parts[-1].end.index == 1000
    assert max(t.messages for t in tasks) <= 400


def test_without_a_locator_nothing_is_split() -> None:
    tasks = plan_tasks([piece("big", 1000)], messages_per_task=100)
    assert len(tasks) == 1 and tasks[0].slices == (piece("big", 1000),)


def test_min_tasks_spreads_work() -> None:
    tasks = plan_tasks([piece(f"t{i}", 100) for i in range(4)], messages_per_task=10_000, min_tasks=2)
    assert sorted(t.messages for t in tasks) == [200, 200]


def test_empty_slices_are_dropped_and_planning_is_deterministic() -> None:
    slices = [piece(f"t{i}", (i * 37) % 90) for i in range(40)]
    first = plan_tasks(slices, messages_per_task=500, locate=fake_locate)
    again = plan_tasks(list(reversed(slices)), messages_per_task=500, locate=fake_locate)
    assert first == again
    assert all(s.count > 0 for t in first for s in t.slices)
    assert plan_tasks([piece("t", 0)], messages_per_task=5) == []


def test_split_slice_respects_counts() -> None:
    assert split_slice(piece("t", 1), 4, fake_locate) == [piece("t", 1)]
    parts = split_slice(piece("t", 10), 3, fake_locate)
    assert [p.count for p in parts] == [3, 3, 4]

"""Admission control: budgets split by backlog, floors, caps, exact totals."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from widehouse.source.admission import Limits, allocate, drain_slack, fewer_cuts, plan_takes, should_wait


def test_everything_is_taken_when_it_fits() -> None:
    assert allocate({"a": 10, "b": 5}, budget=100, floor=3) == {"a": 10, "b": 5}
    assert allocate({"a": 10, "b": 5}, budget=None) == {"a": 10, "b": 5}


def test_the_budget_is_split_by_backlog_and_summed_exactly() -> None:
    grant = allocate({"big": 9000, "mid": 900, "small": 100}, budget=1000)
    assert sum(grant.values()) == 1000
    assert grant["big"] > grant["mid"] > grant["small"] > 0
    assert abs(grant["big"] - 900) <= 1 and abs(grant["mid"] - 90) <= 1


def test_the_floor_keeps_small_topics_alive() -> None:
    grant = allocate({"big": 1_000_000, "small": 50}, budget=1000, floor=100)
    assert grant["small"] == 50  # all of it: below the floor
    assert grant["big"] == 950
    grant = allocate({"big": 1_000_000, "small": 5000}, budget=1000, floor=100)
    assert grant["small"] >= 100 and sum(grant.values()) == 1000


def test_the_floor_shrinks_when_the_budget_cannot_cover_it() -> None:
    demand = {f"t{i}": 1000 for i in range(10)}
    grant = allocate(demand, budget=50, floor=100)
    assert sum(grant.values()) == 50
    assert set(grant.values()) == {5}


def test_topics_take_turns_when_not_even_one_message_each_fits() -> None:
    demand = {f"t{i}": 10 for i in range(5)}
    first = allocate(demand, budget=2, floor=1, rotation=0)
    second = allocate(demand, budget=2, floor=1, rotation=2)
    assert sum(first.values()) == sum(second.values()) == 2
    assert {k for k, v in first.items() if v} != {k for k, v in second.items() if v}


def test_caps_apply_with_and_without_a_budget() -> None:
    assert allocate({"a": 500, "b": 500}, budget=None, caps={"a": 100}) == {"a": 100, "b": 500}
    grant = allocate({"a": 5000, "b": 5000}, budget=1000, caps={"a": 100})
    assert grant == {"a": 100, "b": 900}


def test_zero_and_negative_demands() -> None:
    assert allocate({"a": 0, "b": 7}, budget=3, floor=1) == {"a": 0, "b": 3}
    with pytest.raises(ValueError, match="negative demand"):
        allocate({"a": -1}, budget=3)


def test_allocation_is_deterministic() -> None:
    demand = {f"t{i}": (i * 7919) % 1000 + 1 for i in range(50)}
    assert allocate(demand, 777, 5) == allocate(dict(reversed(list(demand.items()))), 777, 5)


def test_partitions_of_a_topic_share_its_grant() -> None:
    backlog = {("a", 0): 1000, ("a", 1): 10, ("b", -1): 5}
    takes = plan_takes(backlog, Limits(), budget=100)  # floor 1000, shrunk to 50 per topic
    assert sum(takes.values()) == 100
    assert takes[("b", -1)] == 5 and takes[("a", 1)] >= 1
    assert takes[("a", 0)] > takes[("a", 1)]
    tiny_floor = plan_takes(backlog, Limits(min_per_topic=1), budget=100)
    assert sum(tiny_floor.values()) == 100 and 1 <= tiny_floor[("b", -1)] < 5
    assert plan_takes(backlog, Limits(), budget=None) == backlog  # read everything: caps ignored


def test_per_topic_caps_from_limits() -> None:
    limits = Limits(max_per_topic={"a": 10}, default_max_per_topic=20)
    takes = plan_takes({("a", 0): 100, ("b", 0): 100, ("c", 0): 5}, limits, budget=1 << 62)
    assert takes == {("a", 0): 10, ("b", 0): 20, ("c", 0): 5}
    assert limits.limited and not Limits().limited


def test_waiting_for_a_minimum_batch() -> None:
    limits = Limits(min_per_trigger=100, max_trigger_delay_ms=60_000)
    assert should_wait(10, limits, waited_ms=1000, draining=False)
    assert not should_wait(10, limits, waited_ms=61_000, draining=False)
    assert not should_wait(100, limits, waited_ms=0, draining=False)
    assert not should_wait(10, limits, waited_ms=0, draining=True)  # AvailableNow must finish
    assert not should_wait(10, Limits(), waited_ms=0, draining=False)


@given(
    demand=st.dictionaries(
        st.sampled_from([f"t{i}" for i in range(30)]), st.integers(0, 10_000), max_size=30
    ),
    budget=st.integers(0, 50_000),
    floor=st.integers(0, 2000),
    caps=st.dictionaries(st.sampled_from([f"t{i}" for i in range(30)]), st.integers(0, 5000), max_size=10),
)
@settings(max_examples=300, deadline=None)
def test_allocation_invariants(demand: dict[str, int], budget: int, floor: int, caps: dict[str, int]) -> None:
    grant = allocate(demand, budget, floor, caps)
    need = {k: min(v, caps.get(k, v)) for k, v in demand.items()}
    assert set(grant) == set(demand)
    assert all(0 <= grant[k] <= need[k] for k in demand)
    assert sum(grant.values()) == min(budget, sum(need.values()))  # the budget is used, never exceeded
    active = [k for k, n in need.items() if n > 0]
    if floor and active and budget >= len(active) * min(floor, budget // len(active)):
        share = min(floor, budget // len(active))
        assert all(grant[k] >= min(need[k], share) for k in active)  # nobody starves


# -- fewer cuts: whole partitions take turns when the budget is spread over many -------------------
def test_few_cuts_are_left_as_they_are() -> None:
    takes = {"a": 5, "b": 3, "c": 10}
    available = {"a": 10, "b": 10, "c": 10}
    assert fewer_cuts(takes, available, max_cuts=2) == (takes, None)


def test_many_cuts_become_whole_partitions_taking_turns() -> None:
    available = {"a": 10, "b": 10, "c": 10, "d": 10, "e": 10}
    takes = {"a": 4, "b": 4, "c": 4, "d": 4, "e": 4}  # 20 messages, all five cut
    first, last = fewer_cuts(takes, available, max_cuts=1)
    assert first == {"a": 10, "b": 10, "c": 0, "d": 0, "e": 0} and last == "b"
    # the next trigger continues after "b"; a budget that ends inside a partition cuts it once
    takes = {"c": 3, "d": 3, "e": 3, "a": 2, "b": 2}
    available = {"c": 10, "d": 10, "e": 10, "a": 5, "b": 5}
    second, last = fewer_cuts(takes, available, max_cuts=1, after="b")
    assert second == {"c": 10, "d": 3, "e": 0, "a": 0, "b": 0} and last == "d"
    # past the end it wraps around
    third, last = fewer_cuts({"a": 2, "e": 2}, {"a": 5, "e": 5}, max_cuts=1, after="e")
    assert third == {"a": 4, "e": 0} and last == "a"


def test_whole_takes_never_exceed_the_grant_nor_touch_kept_or_whole_ones() -> None:
    available = {("t", 0): 10, ("t", 1): 10, ("u", 0): 10, ("v", 0): 3, ("w", 0): 7}
    takes = {("t", 0): 5, ("t", 1): 5, ("u", 0): 5, ("v", 0): 3, ("w", 0): 0}
    out, _ = fewer_cuts(takes, available, max_cuts=1, keep=lambda key: key[0] == "u")
    assert out[("u", 0)] == 5  # a capped topic keeps its cut
    assert out[("v", 0)] == 3 and out[("w", 0)] == 0  # whole and empty ones are not pooled
    assert out[("t", 0)] == 10 and out[("t", 1)] == 0  # the pool of 10 went to one whole partition
    assert sum(out.values()) == sum(takes.values())


@given(
    st.dictionaries(st.integers(0, 40), st.integers(1, 50), min_size=1, max_size=30),
    st.integers(1, 5),
    st.data(),
)
@settings(max_examples=200, deadline=None)
def test_fewer_cuts_invariants(available: dict[int, int], max_cuts: int, data: st.DataObject) -> None:
    takes = {k: data.draw(st.integers(0, n)) for k, n in available.items()}
    out, _ = fewer_cuts(takes, available, max_cuts)
    assert sum(out.values()) == sum(takes.values())  # the grant moves, it is not lost nor grown
    assert all(0 <= out[k] <= available[k] for k in available)
    before = sum(1 for k in takes if 0 < takes[k] < available[k])
    after = sum(1 for k in out if 0 < out[k] < available[k])
    assert after <= max(max_cuts, 1) if before > max_cuts else out == takes


def test_a_drain_gets_only_the_slack_its_last_batch_has_to_spare() -> None:
    # 100,000 messages in budgets of 33,334: three full batches leave 2 spare in the last
    assert drain_slack(0.1, 100_000, 33_334, 33) == pytest.approx(2 / 33)
    assert drain_slack(0.1, 100_000, 33_334, 34_000) == pytest.approx(2 / 34_000)
    # 300,000 in budgets of 20,000: no room at all, exact cuts
    assert drain_slack(0.1, 300_000, 20_000, 5_000) == 0.0
    # 250 in budgets of 100: the last batch has 50 spare, more than 0.1 of a 100-message cut
    assert drain_slack(0.1, 250, 100, 100) == 0.1
    assert drain_slack(0.3, 250, 100, 100) == pytest.approx(0.3)
    assert drain_slack(0.3, 250, 100, 200) == pytest.approx(0.25)
    # the last batch (everything fits), no cut or no slack asked: what was asked
    assert drain_slack(0.1, 90, 100, 10) == 0.1
    assert drain_slack(0.1, 1_000, 100, 0) == 0.1
    assert drain_slack(0.0, 1_000, 300, 100) == 0.0


@settings(max_examples=300, deadline=None)
@given(
    remaining=st.integers(1, 100_000),
    budget=st.integers(1, 20_000),
    slack=st.sampled_from([0.0, 0.05, 0.1, 0.3, 0.5]),
    data=st.data(),
)
def test_a_drain_never_takes_a_batch_more_for_its_slack(
    remaining: int, budget: int, slack: float, data: st.DataObject
) -> None:
    """Batch after batch, every cut falling as short as its slack lets it (rounded as the search's
    floor rounds: a whole number of messages): the drain ends in ``ceil(remaining / budget)``."""
    batches, left = 0, remaining
    while left > 0:
        take = min(budget, left)
        cut = data.draw(st.integers(0, take), label="messages granted to cut partitions")
        share = drain_slack(slack, left, budget, cut)
        short = int(cut * share) if take < left else 0  # the last batch takes everything: no cut
        left -= take - short
        batches += 1
        assert batches <= -(-remaining // budget)

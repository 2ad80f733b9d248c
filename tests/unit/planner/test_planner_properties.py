"""Properties of plan() over generated traffic (hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from widehouse.planner import Plan, PlannerSettings, TopicTraffic, dump_plan, plan
from widehouse.planner.model import GROUP_NAME_RE

CAPACITY = 1000.0

rates = st.one_of(
    st.just(0.0),
    st.floats(min_value=0.0, max_value=50.0, allow_nan=False),
    st.floats(min_value=0.0, max_value=CAPACITY, allow_nan=False),
    st.floats(min_value=0.0, max_value=20 * CAPACITY, allow_nan=False),
)


@st.composite
def traffics(draw: st.DrawFn) -> list[TopicTraffic]:
    names = draw(st.lists(st.integers(0, 400), unique=True, max_size=80))
    return [
        TopicTraffic(f"persistent://acme/app/t{n}", draw(st.floats(0, 5, allow_nan=False)), draw(rates))
        for n in names
    ]


@st.composite
def planner_settings(draw: st.DrawFn) -> PlannerSettings:
    target = draw(st.sampled_from([0.5, 0.7, 0.8, 1.0]))
    return PlannerSettings(
        slot_capacity=CAPACITY,
        message_cost=draw(st.sampled_from([0.0, 1.0, 20.0])),
        target_fill=target,
        isolation=draw(st.sampled_from([0.1, 0.3, 0.5])) * target / 0.5 if target < 1 else 0.5,
        partition_capacity=draw(st.sampled_from([100.0, 1000.0])),
        max_partitions=draw(st.integers(1, 32)),
        max_group_topics=draw(st.integers(1, 30)),
        imbalance=draw(st.sampled_from([0.0, 0.25, 1.0])),
    )


def check_plan(result: Plan, records: list[TopicTraffic], s: PlannerSettings) -> None:
    topics = [topic for group in result.groups for topic in group.topics]
    # every topic lands in exactly one group, and no other topic appears
    assert sorted(topics) == sorted(r.topic for r in records)
    assert len(set(topics)) == len(topics)
    loads = {r.topic: r.load(s) for r in records}
    for group in result.groups:
        assert group.topics and GROUP_NAME_RE.fullmatch(group.name)
        assert abs(group.load - sum(loads[t] for t in group.topics)) <= 1e-6 * max(1.0, group.load)
        if group.isolated:
            assert len(group.topics) == 1
            assert group.load <= group.cores * s.slot_capacity + 1e-6
        else:
            # no packed group exceeds capacity (nor the topic limit)
            assert group.cores == 1
            assert group.load <= s.slot_capacity + 1e-6
            assert len(group.topics) <= s.max_group_topics
    assert set(result.partitions) == set(loads)
    assert all(n >= 1 for n in result.partitions.values())


@settings(max_examples=150, deadline=None)
@given(records=traffics(), s=planner_settings())
def test_fresh_plans_place_every_topic_once_and_fill_packed_groups_to_the_target(
    records: list[TopicTraffic], s: PlannerSettings
) -> None:
    result = plan(records, s)
    check_plan(result, records, s)
    target = s.target_fill * s.slot_capacity
    assert all(g.load <= target + 1e-6 for g in result.groups if not g.isolated)
    assert all(n <= s.max_partitions for n in result.partitions.values())
    assert dump_plan(plan(list(reversed(records)), s)) == dump_plan(result)


@settings(max_examples=150, deadline=None)
@given(first=traffics(), second=traffics(), s=planner_settings())
def test_replans_keep_the_invariants_and_never_shrink_partitions(
    first: list[TopicTraffic], second: list[TopicTraffic], s: PlannerSettings
) -> None:
    previous = plan(first, s)
    result = plan(second, s, previous)
    check_plan(result, second, s)
    for topic, count in result.partitions.items():
        assert count >= previous.partitions.get(topic, 0)
    old_names = {g.name for g in previous.groups if not g.isolated}
    new_packed = [g.name for g in result.groups if not g.isolated and g.name not in old_names]
    # new packed groups get numbers above every previous one
    assert all(int(name[1:]) >= previous.next_group for name in new_packed)
    assert dump_plan(plan(second, s, previous)) == dump_plan(result)


@settings(max_examples=100, deadline=None)
@given(records=traffics(), s=planner_settings())
def test_replanning_the_same_traffic_moves_nothing(records: list[TopicTraffic], s: PlannerSettings) -> None:
    previous = plan(records, s)
    again = plan(records, s, previous)
    assert dict(again.assignment) == dict(previous.assignment)

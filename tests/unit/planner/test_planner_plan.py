"""plan(): isolation, packing, stability across replans, partitions, determinism, speed."""

from __future__ import annotations

import math
import random
import time
from pathlib import Path

import pytest

from widehouse.errors import ConfigError, PlanError
from widehouse.planner import (
    PlannerSettings,
    TopicTraffic,
    diff_plans,
    dump_plan,
    isolated_group_name,
    plan,
    summarize,
)
from widehouse.planner.model import GROUP_NAME_RE

# capacity 1,000 bytes/s per core, no message cost: loads are the byte rates
S = PlannerSettings(
    slot_capacity=1000.0,
    message_cost=0.0,
    target_fill=0.8,
    isolation=0.5,
    partition_capacity=250.0,
    max_partitions=16,
    max_group_topics=100,
    imbalance=0.25,
)


def t(name: str) -> str:
    return f"persistent://acme/app/{name}"


def traffic(**loads: float) -> list[TopicTraffic]:
    return [TopicTraffic(t(name), 1.0, load) for name, load in loads.items()]


def packed_loads(result: object) -> list[float]:
    return [g.load for g in result.groups if not g.isolated]  # type: ignore[attr-defined]


def test_load_counts_bytes_and_a_cost_per_message() -> None:
    record = TopicTraffic(t("a"), msg_rate=100.0, byte_rate=5000.0)
    assert record.load(PlannerSettings(message_cost=20.0)) == 5000.0 + 100 * 20.0
    # a tiny topic at a high message rate weighs more than its bytes
    tiny = plan([TopicTraffic(t("chatty"), 10_000.0, 10_000.0)], PlannerSettings(slot_capacity=1e6))
    assert tiny.groups[0].load == 10_000.0 + 10_000 * 500.0


def test_one_topic_bigger_than_a_whole_slot_is_isolated_with_cores_for_its_load() -> None:
    result = plan(traffic(huge=3500.0, a=100.0, b=200.0), S)
    huge = result.group_of(t("huge"))
    assert huge.isolated and huge.topics == (t("huge"),)
    assert huge.name == isolated_group_name(t("huge"))
    assert huge.cores == math.ceil(3500 / 800) == 5
    assert huge.fill(S) <= S.target_fill
    # it reads with at least one partition per core (and one per 250 bytes/s)
    assert result.partitions[t("huge")] == 14
    # the light topics share one group
    assert result.group_of(t("a")) == result.group_of(t("b"))
    assert not result.group_of(t("a")).isolated
    assert result.cores == 6


def test_partitions_follow_traffic_within_limits() -> None:
    result = plan(traffic(a=0.0, b=240.0, c=260.0, d=399.0), S)
    assert result.partitions == {t("a"): 1, t("b"): 1, t("c"): 2, t("d"): 2}
    capped = plan(traffic(x=100_000.0), S)
    assert capped.partitions[t("x")] == S.max_partitions
    assert capped.groups[0].cores == 125  # cores still follow the load


def test_all_zero_traffic_packs_every_topic_in_as_few_groups_as_the_topic_limit_allows() -> None:
    records = [TopicTraffic(t(f"z{i:03d}"), 0.0, 0.0) for i in range(250)]
    result = plan(records, S)
    assert [len(g.topics) for g in result.groups] == [100, 100, 50]
    assert [g.name for g in result.groups] == ["g001", "g002", "g003"]
    assert all(g.load == 0 and g.cores == 1 and not g.isolated for g in result.groups)
    assert set(result.partitions.values()) == {1}
    assert summarize(result, S).lower_bound_groups == 3


def test_no_topics_gives_an_empty_plan() -> None:
    result = plan([], S)
    assert result.groups == () and dict(result.partitions) == {}


def test_light_topics_pack_near_the_lower_bound_and_under_the_target() -> None:
    rng = random.Random(3)
    records = [TopicTraffic(t(f"l{i:03d}"), 1.0, rng.uniform(0, 300)) for i in range(300)]
    result = plan(records, S)
    summary = summarize(result, S)
    assert all(load <= 800.0 + 1e-6 for load in packed_loads(result))
    assert summary.groups <= summary.lower_bound_groups + 1


def test_a_new_topic_joins_an_existing_group_and_moves_nothing() -> None:
    before = plan(traffic(a=300.0, b=200.0, c=350.0, d=100.0), S)
    after = plan(traffic(a=300.0, b=200.0, c=350.0, d=100.0, new=50.0), S, before)
    diff = diff_plans(before, after)
    assert diff.moved == () and diff.added == (t("new"),)
    assert after.group_of(t("new")).name in {g.name for g in before.groups}
    assert len(after.groups) == len(before.groups)


def test_a_removed_topic_is_dropped_and_its_empty_group_name_is_never_reused() -> None:
    before = plan(traffic(a=450.0, b=450.0, c=100.0), S)
    assert [(g.name, g.topics) for g in before.groups] == [("g001", (t("a"), t("c"))), ("g002", (t("b"),))]
    after = plan(traffic(a=450.0, c=100.0), S, before)
    assert t("b") not in after.assignment and t("b") not in after.partitions
    diff = diff_plans(before, after)
    assert diff.removed == (t("b"),) and diff.moved == ()
    assert diff.groups_removed == ("g002",)
    assert after.next_group == 3
    # a later new group gets a fresh number, not the one of the vanished group
    third = plan(traffic(a=450.0, c=100.0, e=450.0), S, after)
    assert [g.name for g in third.groups] == ["g001", "g003"]
    assert third.group_of(t("e")).name == "g003"


def test_a_previous_plan_that_no_longer_fits_moves_the_fewest_topics() -> None:
    loads = {f"p{i}": 100.0 for i in range(8)}  # 800 = exactly the target, one group
    before = plan(traffic(**loads), S)
    assert len(before.groups) == 1
    loads["p0"] = 450.0  # 1,150: over capacity
    after = plan(traffic(**loads), S, before)
    assert all(load <= S.slot_capacity for load in packed_loads(after))
    diff = diff_plans(before, after)
    # the lightest single topic that removes the whole excess (350) leaves: p0 itself
    assert [m.topic for m in diff.moved] == [t("p0")]
    assert before.groups[0].name in {g.name for g in after.groups}


def test_a_group_that_stays_under_capacity_keeps_its_topics_even_above_the_target() -> None:
    loads = {f"p{i}": 100.0 for i in range(8)}
    before = plan(traffic(**loads), S)
    loads = dict.fromkeys(loads, 120.0)  # 960: above the 800 target, under the hot 1,000
    after = plan(traffic(**loads), S, before)
    assert diff_plans(before, after).moved == ()


def test_small_traffic_changes_move_no_topic() -> None:
    rng = random.Random(11)
    base = {f"s{i:03d}": rng.paretovariate(1.2) * 20 for i in range(400)}
    before = plan(traffic(**base), S)
    changed = dict(base)
    for name in rng.sample(sorted(base), 40):
        changed[name] = base[name] * rng.choice((0.9, 1.1))
    after = plan(traffic(**changed), S, before)
    assert len(diff_plans(before, after).moved) <= 2


def test_groups_are_consolidated_when_traffic_falls_far() -> None:
    before = plan(traffic(**{f"c{i}": 390.0 for i in range(20)}), S)
    assert len(before.groups) == 10
    after = plan(traffic(**{f"c{i}": 40.0 for i in range(20)}), S, before)
    # 800 of load fits one group; a few extra groups are tolerated, not ten
    assert len(after.groups) <= 2
    assert all(load <= 800.0 + 1e-6 for load in packed_loads(after))
    assert {g.name for g in after.groups} <= {g.name for g in before.groups}


def test_isolation_has_hysteresis() -> None:
    before = plan(traffic(heavy=600.0, other=10.0), S)
    assert before.group_of(t("heavy")).isolated
    stays = plan(traffic(heavy=450.0, other=10.0), S, before)  # below 500, above 0.8 x 500
    assert stays.group_of(t("heavy")).isolated
    released = plan(traffic(heavy=300.0, other=10.0), S, stays)
    assert not released.group_of(t("heavy")).isolated
    assert plan(traffic(heavy=450.0, other=10.0), S).group_of(t("heavy")).isolated is False


def test_isolated_cores_keep_their_count_until_clearly_wrong() -> None:
    before = plan(traffic(big=2000.0), S)
    assert before.groups[0].cores == 3
    assert plan(traffic(big=2300.0), S, before).groups[0].cores == 3  # 767/core: under capacity
    assert plan(traffic(big=3100.0), S, before).groups[0].cores == 4  # over 3 x 1,000
    assert plan(traffic(big=1500.0), S, before).groups[0].cores == 3  # 2 cores would be 94% full
    assert plan(traffic(big=1100.0), S, before).groups[0].cores == 2  # under 2 x 800 x 0.75


def test_partitions_only_grow() -> None:
    before = plan(traffic(a=2000.0), S)
    assert before.partitions[t("a")] == 8
    calmer = plan(traffic(a=100.0), S, before)
    assert calmer.partitions[t("a")] == 8
    # a topic that already has more partitions in Pulsar keeps them
    live = plan([TopicTraffic(t("a"), 1.0, 100.0, partitions=12)], S)
    assert live.partitions[t("a")] == 12


def test_same_input_gives_byte_identical_plans_whatever_the_order() -> None:
    rng = random.Random(5)
    records = [TopicTraffic(t(f"d{i:04d}"), rng.uniform(0, 50), rng.uniform(0, 900)) for i in range(500)]
    first = dump_plan(plan(records, S))
    shuffled = records[:]
    rng.shuffle(shuffled)
    assert dump_plan(plan(shuffled, S)) == first
    previous = plan(records[:400], S)
    assert dump_plan(plan(records, S, previous)) == dump_plan(plan(shuffled, S, previous))


def test_group_names_are_safe_and_stable() -> None:
    a = isolated_group_name("persistent://acme/app/Page.View_2024")
    assert a == isolated_group_name("persistent://acme/app/Page.View_2024")
    assert a.startswith("iso-page-view-2024-") and GROUP_NAME_RE.fullmatch(a)
    # same local name in another namespace: another group
    assert isolated_group_name("persistent://other/app/Page.View_2024") != a
    long = isolated_group_name("persistent://acme/app/" + "x" * 200)
    assert GROUP_NAME_RE.fullmatch(long) and len(long) <= 64
    assert GROUP_NAME_RE.fullmatch(isolated_group_name("persistent://acme/app/___"))


def test_traffic_is_validated() -> None:
    with pytest.raises(PlanError, match="appears twice"):
        plan([TopicTraffic(t("a"), 1, 1), TopicTraffic(t("a"), 2, 2)], S)
    with pytest.raises(PlanError, match="byte_rate of persistent://acme/app/a must be >= 0"):
        plan([TopicTraffic(t("a"), 1, -1)], S)
    with pytest.raises(PlanError, match=r"msg_rate .* finite"):
        plan([TopicTraffic(t("a"), float("nan"), 1)], S)
    with pytest.raises(PlanError, match="is a partition"):
        plan([TopicTraffic(t("a-partition-3"), 1, 1)], S)
    with pytest.raises(PlanError, match="not a full Pulsar topic name"):
        plan([TopicTraffic("just-a-name", 1, 1)], S)
    with pytest.raises(PlanError, match="does not match"):
        plan({t("b"): TopicTraffic(t("a"), 1, 1)}, S)


def test_settings_are_validated_naming_the_field() -> None:
    with pytest.raises(ConfigError, match="slot_capacity=0"):
        PlannerSettings(slot_capacity=0)
    with pytest.raises(ConfigError, match=r"isolation=0\.9 must be <= target_fill=0\.8"):
        PlannerSettings(isolation=0.9)
    with pytest.raises(ConfigError, match="smoothing"):
        PlannerSettings(smoothing=0)
    with pytest.raises(ConfigError, match="finite"):
        PlannerSettings(partition_capacity=float("inf"))


def test_ten_thousand_topics_plan_well_under_a_second() -> None:
    rng = random.Random(1)
    records = [
        TopicTraffic(f"persistent://acme/app/t{i:05d}", rng.uniform(0, 100), 1e9 / (i + 1) ** 1.1)
        for i in range(10_000)
    ]
    settings = PlannerSettings()
    start = time.perf_counter()
    first = plan(records, settings)
    fresh = time.perf_counter() - start
    start = time.perf_counter()
    plan(records, settings, first)
    replan = time.perf_counter() - start
    assert fresh < 1.0 and replan < 1.0, (fresh, replan)


def test_settings_come_from_widehouse_plan_variables(tmp_path: Path) -> None:
    from widehouse.settings import load_settings

    env = {
        "WIDEHOUSE_STATE_DIR": str(tmp_path),
        "WIDEHOUSE_PLAN_SLOT_CAPACITY": "5e6",
        "WIDEHOUSE_PLAN_MESSAGE_COST": "0",
        "WIDEHOUSE_PLAN_TARGET_FILL": "0.7",
        "WIDEHOUSE_PLAN_ISOLATION": "0.7",
        "WIDEHOUSE_PLAN_PARTITION_CAPACITY": "1000000",
        "WIDEHOUSE_PLAN_MAX_PARTITIONS": "8",
        "WIDEHOUSE_PLAN_MAX_GROUP_TOPICS": "50",
        "WIDEHOUSE_PLAN_IMBALANCE": "0",
        "WIDEHOUSE_PLAN_SMOOTHING": "3",
    }
    assert load_settings(env).planner == PlannerSettings(5e6, 0.0, 0.7, 0.7, 1e6, 8, 50, 0.0, 3)
    assert load_settings({"WIDEHOUSE_STATE_DIR": str(tmp_path)}).planner == PlannerSettings()
    with pytest.raises(ConfigError, match=r"WIDEHOUSE_PLAN_TARGET_FILL='1.5' is invalid"):
        load_settings({**env, "WIDEHOUSE_PLAN_TARGET_FILL": "1.5"})
    with pytest.raises(ConfigError, match=r"WIDEHOUSE_PLAN_MAX_PARTITIONS='0' is invalid"):
        load_settings({**env, "WIDEHOUSE_PLAN_MAX_PARTITIONS": "0"})
    with pytest.raises(
        ConfigError, match=r"WIDEHOUSE_PLAN_\* settings: .*isolation=0\.7 must be <= target_fill=0\.5"
    ):
        load_settings({**env, "WIDEHOUSE_PLAN_TARGET_FILL": "0.5"})

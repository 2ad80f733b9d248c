"""Slot planner vs hashing vs round-robin on Zipf traffic: balance, groups, planning time, moves.

For each topic count, topic loads follow a Zipf law (rank r carries load proportional to r^-s)
with message sizes drawn between 100 B and 2 kB, scaled so that the total is ``--load-per-topic``
cores' worth per topic. The planner plans with its default settings (capacity 40 MB/s per core,
80% target fill); hashing (CRC32 of the topic name) and round-robin (sorted names) spread the same
topics over the same number of cores the plan uses. Then 10% of the topics change traffic by
+-30% and each method replans; "moved" is the share of topics whose core/group changed, matching
each new group with the old group it shares the most topics with (so renumbering is not a move).

    python -m bench planner [--topics 1000,10000] [--zipf 1.1] [--runs 5] [--seed 7] [--share 0.1 --delta 0.3]
"""

from __future__ import annotations

import argparse
import random
import statistics
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

from bench.common import machine, median_time, save, table, timed
from widehouse.planner import Plan, PlannerSettings, TopicTraffic, core_loads, plan, summarize


def zipf_traffic(
    n: int, s: float, total_cores: float, settings: PlannerSettings, seed: int
) -> list[TopicTraffic]:
    rng = random.Random(seed)
    weights = [r**-s for r in range(1, n + 1)]
    scale = total_cores * settings.slot_capacity / sum(weights)
    records = []
    for rank, weight in enumerate(weights, start=1):
        load = weight * scale
        size = rng.uniform(100, 2000)
        msg_rate = load / (size + settings.message_cost)
        records.append(TopicTraffic(f"persistent://bench/zipf/topic-{rank:05d}", msg_rate, msg_rate * size))
    rng.shuffle(records)  # rank must not leak into name order (round-robin)
    return records


def perturb(records: Sequence[TopicTraffic], share: float, delta: float, seed: int) -> list[TopicTraffic]:
    """``share`` of the topics (at random) scaled by 1 +- ``delta``."""
    rng = random.Random(seed)
    changed = set(rng.sample(range(len(records)), round(share * len(records))))
    out = []
    for i, record in enumerate(records):
        factor = 1 + rng.choice((-delta, delta)) if i in changed else 1.0
        out.append(TopicTraffic(record.topic, record.msg_rate * factor, record.byte_rate * factor))
    return out


def hashed(records: Sequence[TopicTraffic], cores: int) -> dict[str, int]:
    return {r.topic: zlib.crc32(r.topic.encode()) % cores for r in records}


def round_robin(records: Sequence[TopicTraffic], cores: int) -> dict[str, int]:
    return {topic: i % cores for i, topic in enumerate(sorted(r.topic for r in records))}


def static_core_loads(
    assignment: Mapping[str, int], records: Sequence[TopicTraffic], cores: int, s: PlannerSettings
) -> list[float]:
    loads = [0.0] * cores
    for r in records:
        loads[assignment[r.topic]] += r.load(s)
    return loads


def moved_share(before: Mapping[str, Any], after: Mapping[str, Any]) -> float:
    """Share of common topics whose group changed, after matching new groups to old ones by overlap."""
    common = set(before) & set(after)
    overlap: dict[tuple[Any, Any], int] = {}
    for topic in common:
        key = (after[topic], before[topic])
        overlap[key] = overlap.get(key, 0) + 1
    matched_new: set[Any] = set()
    matched_old: set[Any] = set()
    stayed = 0
    for (new, old), count in sorted(overlap.items(), key=lambda kv: (-kv[1], str(kv[0]))):
        if new in matched_new or old in matched_old:
            continue
        matched_new.add(new)
        matched_old.add(old)
        stayed += count
    return 1 - stayed / len(common) if common else 0.0


def row(
    method: str,
    *,
    groups: int | str,
    lower_bound: int | str,
    loads: Sequence[float],
    plan_s: float,
    replan_s: float,
    moved: float,
    loads_after: Sequence[float],
    s: PlannerSettings,
) -> list[Any]:
    """One table row: balance before and after the traffic change."""
    mean, mean_after = statistics.fmean(loads), statistics.fmean(loads_after)
    return [
        method,
        groups,
        lower_bound,
        len(loads),
        round(max(loads) / mean, 2),
        f"{max(loads) / s.slot_capacity:.0%}",
        sum(1 for x in loads if x > s.slot_capacity),
        round(plan_s * 1e3, 2),
        round(replan_s * 1e3, 2),
        f"{moved:.1%}",
        round(max(loads_after) / mean_after, 2),
        f"{max(loads_after) / s.slot_capacity:.0%}",
        sum(1 for x in loads_after if x > s.slot_capacity),
    ]


HEADER = (
    "method",
    "groups",
    "groups LB",
    "cores",
    "max/mean",
    "max fill",
    "cores >cap",
    "plan ms",
    "replan ms",
    "moved",
    "max/mean after",
    "max fill after",
    "cores >cap after",
)


def run_one(
    n: int, zipf_s: float, load_per_topic: float, runs: int, seed: int, *, share: float, delta: float
) -> dict[str, Any]:
    s = PlannerSettings()
    records = zipf_traffic(n, zipf_s, n * load_per_topic, s, seed)
    changed = perturb(records, share, delta, seed + 1)

    first: Plan = plan(records, s)
    summary = summarize(first, s)
    cores = first.cores
    t_plan = median_time(lambda: plan(records, s), runs=runs)
    t_replan = median_time(lambda: plan(changed, s, first), runs=runs)
    replanned = plan(changed, s, first)
    fresh = plan(changed, s)
    # a replan keeping the plan in force, and one from scratch (its time is the first plan's)
    rows = [
        row(
            label,
            groups=summary.groups,
            lower_bound=summary.lower_bound_groups,
            loads=core_loads(first),
            plan_s=t_plan,
            replan_s=replan_s,
            moved=moved_share(first.assignment, after.assignment),
            loads_after=core_loads(after),
            s=s,
        )
        for label, replan_s, after in (
            ("planner", t_replan, replanned),
            ("planner, replan without previous", t_plan, fresh),
        )
    ]
    # the planner's isolation, with the light topics hashed onto as many cores as it packed them into
    isolated = {t for g in first.groups if g.isolated for t in g.topics}
    light = [r for r in records if r.topic not in isolated]
    light_after = [r for r in changed if r.topic not in isolated]
    packed_cores = sum(1 for g in first.groups if not g.isolated)
    iso_loads = [x for g in first.groups if g.isolated for x in [g.load / g.cores] * g.cores]
    iso_after = [x for g in replanned.groups if g.isolated for x in [g.load / g.cores] * g.cores]
    assignment, elapsed = timed(lambda: hashed(light, packed_cores))
    again = hashed(light_after, packed_cores)
    rows.append(
        row(
            "isolate heavy + hash the rest",
            groups=packed_cores + summary.isolated_groups,
            lower_bound="-",
            loads=iso_loads + static_core_loads(assignment, light, packed_cores, s),
            plan_s=elapsed,
            replan_s=elapsed,
            moved=moved_share(assignment, again),
            loads_after=iso_after + static_core_loads(again, light_after, packed_cores, s),
            s=s,
        )
    )
    for name, method in (("hashing", hashed), ("round-robin", round_robin)):
        assignment, elapsed = timed(lambda method=method: method(records, cores))
        again = method(changed, cores)
        rows.append(
            row(
                name,
                groups=cores,
                lower_bound="-",
                loads=static_core_loads(assignment, records, cores, s),
                plan_s=elapsed,
                replan_s=elapsed,
                moved=moved_share(assignment, again),
                loads_after=static_core_loads(again, changed, cores, s),
                s=s,
            )
        )
    return {
        "topics": n,
        "total_load_cores": n * load_per_topic,
        "lower_bound_cores": summary.lower_bound_cores,
        "isolated": summary.isolated_groups,
        "rows": rows,
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench planner", description=__doc__.splitlines()[0])
    parser.add_argument("--topics", default="1000,10000", help="comma-separated topic counts")
    parser.add_argument("--zipf", type=float, default=1.1, help="Zipf exponent s (load of rank r ~ r^-s)")
    parser.add_argument("--load-per-topic", type=float, default=0.04, help="total load, in cores per topic")
    parser.add_argument("--runs", type=int, default=5, help="timed runs (median)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--share", type=float, default=0.10, help="share of topics whose traffic changes")
    parser.add_argument("--delta", type=float, default=0.30, help="relative change (+ or -, at random)")
    args = parser.parse_args(argv)

    print(f"machine: {machine()}")
    results = []
    for n in (int(x) for x in args.topics.split(",")):
        figures = run_one(
            n, args.zipf, args.load_per_topic, args.runs, args.seed, share=args.share, delta=args.delta
        )
        title = (
            f"\n{n:,} topics, Zipf s={args.zipf}, total load {figures['total_load_cores']:.0f} cores' worth "
            f"(lower bound {figures['lower_bound_cores']} cores at 100% fill, "
            f"{figures['isolated']} topics isolated); then {args.share:.0%} of topics change by "
            f"+-{args.delta:.0%}"
        )
        print(table(title, HEADER, figures["rows"]))
        results.append(figures)
    path = save("planner", {"args": vars(args), "header": HEADER, "results": results})
    print(f"\nsaved {path}")
    return 0

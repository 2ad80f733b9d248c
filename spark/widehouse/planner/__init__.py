"""The slot planner: group topics into slot groups by traffic, size partitions by traffic.

``plan(traffic, settings, previous=None) -> Plan`` (model in :mod:`widehouse.planner.planning`);
traffic from a CSV (:mod:`.traffic`) or live Pulsar stats (:mod:`.live`, smoothed in
:mod:`.observations`); plan files in :mod:`.io`; moves and costs in :mod:`.summary`; partitions
applied to Pulsar by :mod:`.apply`. Pyspark-free: the CLI and Airflow DAGs import it.
"""

from __future__ import annotations

from widehouse.planner.io import dump_plan, load_plan, plan_from_dict, plan_to_dict, save_plan
from widehouse.planner.model import Group, Plan, TopicTraffic, isolated_group_name
from widehouse.planner.planning import lower_bound_groups, plan
from widehouse.planner.summary import PlanDiff, PlanSummary, core_loads, diff_plans, summarize
from widehouse.planner.traffic import load_traffic_csv, normalize_topic, write_traffic_csv
from widehouse.settings import PlannerSettings

__all__ = [
    "Group",
    "Plan",
    "PlanDiff",
    "PlanSummary",
    "PlannerSettings",
    "TopicTraffic",
    "core_loads",
    "diff_plans",
    "dump_plan",
    "isolated_group_name",
    "load_plan",
    "load_traffic_csv",
    "lower_bound_groups",
    "normalize_topic",
    "plan",
    "plan_from_dict",
    "plan_to_dict",
    "save_plan",
    "summarize",
    "write_traffic_csv",
]

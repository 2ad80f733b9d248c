"""The fair scheduler's pools of a stream app: one per slot group (read by Spark's scheduler)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from widehouse.stream.spark.job import pools_xml


def test_each_group_gets_a_pool_of_equal_weight_that_runs_its_own_jobs_in_order() -> None:
    root = ET.fromstring(pools_xml(["g001", "g002"]))
    assert root.tag == "allocations"
    pools = {
        p.get("name"): (p.findtext("schedulingMode"), p.findtext("weight"), p.findtext("minShare"))
        for p in root.findall("pool")
    }
    assert pools == {"g001": ("FIFO", "1", "0"), "g002": ("FIFO", "1", "0")}


def test_a_group_name_is_quoted_in_the_file() -> None:
    root = ET.fromstring(pools_xml(['a"<b>&c']))
    assert [p.get("name") for p in root.findall("pool")] == ['a"<b>&c']

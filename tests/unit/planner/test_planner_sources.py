"""Traffic sources without services: the CSV file, the observation store, stats parsing, topic listing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from widehouse.errors import ConfigError, PlanError
from widehouse.planner import TopicTraffic, load_traffic_csv, normalize_topic, write_traffic_csv
from widehouse.planner.live import LiveTopic, TopicSelection, list_live_topics, rates
from widehouse.planner.observations import ObservationStore


def csv_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "traffic.csv"
    path.write_text(text)
    return path


def test_csv_reads_topics_expanding_short_names(tmp_path: Path) -> None:
    path = csv_file(
        tmp_path,
        "topic,msg_rate,byte_rate\n"
        "persistent://acme/app/clicks,100,25000.5\n"
        "\n"
        "acme/app/views, 2 ,300\n"
        "tiny,0,0\n",
    )
    assert load_traffic_csv(path) == [
        TopicTraffic("persistent://acme/app/clicks", 100.0, 25000.5),
        TopicTraffic("persistent://acme/app/views", 2.0, 300.0),
        TopicTraffic("persistent://public/default/tiny", 0.0, 0.0),
    ]


def test_csv_columns_may_come_in_any_order_and_a_bom_is_tolerated(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_bytes("\ufeffbyte_rate,topic,msg_rate\r\n10,a/b/c,1\r\n".encode())
    assert load_traffic_csv(path) == [TopicTraffic("persistent://a/b/c", 1.0, 10.0)]


def test_csv_round_trips(tmp_path: Path) -> None:
    records = [TopicTraffic("persistent://a/b/x", 0.1, 1 / 3), TopicTraffic("persistent://a/b/y", 5.0, 0.0)]
    assert load_traffic_csv(write_traffic_csv(records, tmp_path / "t.csv")) == records


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", r"is empty; expected the header topic,msg_rate,byte_rate"),
        ("topic,rate\n", r":1: header must be topic,msg_rate,byte_rate; got topic,rate"),
        ("topic,msg_rate,byte_rate,extra\n", r":1: header must be"),
        ("topic,msg_rate,byte_rate\na/b/c,1\n", r":2: expected 3 columns, got 2"),
        ("topic,msg_rate,byte_rate\na/b/c,x,1\n", r":2: msg_rate: 'x' is not a number"),
        ("topic,msg_rate,byte_rate\na/b/c,1,-5\n", r":2: byte_rate: must be a finite number >= 0, got '-5'"),
        ("topic,msg_rate,byte_rate\na/b/c,nan,1\n", r":2: msg_rate: must be a finite number"),
        (
            "topic,msg_rate,byte_rate\na/b/c,1,1\n\npersistent://a/b/c,2,2\n",
            r":4: topic .*a/b/c is already on line 2",
        ),
        ("topic,msg_rate,byte_rate\na/b/c-partition-0,1,1\n", r":2: topic .* is a partition"),
        ("topic,msg_rate,byte_rate\na/b,1,1\n", r":2: topic 'a/b' is not a full Pulsar topic name"),
    ],
)
def test_csv_errors_name_the_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    path = csv_file(tmp_path, text)
    with pytest.raises(PlanError, match=message) as info:
        load_traffic_csv(path)
    assert str(path) in str(info.value)


def test_missing_csv_is_named(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match=r"cannot read traffic file .*missing.csv"):
        load_traffic_csv(tmp_path / "missing.csv")


def test_normalize_topic() -> None:
    assert normalize_topic("x") == "persistent://public/default/x"
    assert normalize_topic("t/n/x") == "persistent://t/n/x"
    assert normalize_topic("non-persistent://t/n/x") == "non-persistent://t/n/x"


def test_observations_smooth_to_the_median_of_the_last_n(tmp_path: Path) -> None:
    store = ObservationStore(tmp_path / "planner", keep=4)
    topic = "persistent://a/b/c"
    for at, (msgs, size) in enumerate([(10, 1000), (11, 1100), (500, 90000), (12, 1200), (13, 1300)]):
        store.record({topic: (msgs, size)}, at=1000.0 + at)
    assert [o.msg_rate for o in store.history(topic)] == [11, 500, 12, 13]  # keeps the last 4
    # a one-off spike does not move the median
    assert store.smoothed([topic], window=3) == {topic: (13.0, 1300.0)}
    assert store.smoothed([topic], window=4) == {topic: (12.5, 1250.0)}
    assert store.smoothed([topic, "persistent://a/b/never"], window=1) == {topic: (13.0, 1300.0)}


def test_observations_prune_old_samples_and_gone_topics(tmp_path: Path) -> None:
    store = ObservationStore(tmp_path, max_age=100.0)
    store.record({"persistent://a/b/old": (1, 1), "persistent://a/b/kept": (1, 1)}, at=1000.0)
    store.record({"persistent://a/b/kept": (2, 2)}, at=1050.0)
    store.record({"persistent://a/b/kept": (3, 3)}, at=1120.0)
    body = json.loads((tmp_path / "observations.json").read_text())
    assert body["version"] == 1
    assert list(body["topics"]) == ["persistent://a/b/kept"]
    assert [o[0] for o in body["topics"]["persistent://a/b/kept"]] == [1050.0, 1120.0]


def test_corrupt_observations_are_reported_with_the_fix(tmp_path: Path) -> None:
    (tmp_path / "observations.json").write_text("{broken")
    with pytest.raises(PlanError, match=r"observations .*observations.json are unreadable.*delete the file"):
        ObservationStore(tmp_path).smoothed(["persistent://a/b/c"], 3)


def test_stats_rates_sum_over_partitions() -> None:
    partitioned = {
        "msgRateIn": 999.0,  # the aggregate is ignored when per-partition stats are present
        "msgThroughputIn": 999.0,
        "partitions": {
            "persistent://a/b/c-partition-0": {"msgRateIn": 10.5, "msgThroughputIn": 1000.0},
            "persistent://a/b/c-partition-1": {"msgRateIn": 4.5, "msgThroughputIn": 500.0},
            "persistent://a/b/c-partition-2": {"msgRateIn": None, "msgThroughputIn": "NaN"},
        },
    }
    assert rates(partitioned) == (15.0, 1500.0)
    assert rates({"msgRateIn": 3.0, "msgThroughputIn": 300.0}) == (3.0, 300.0)
    assert rates({"msgRateIn": 3.0, "msgThroughputIn": 300.0, "partitions": {}}) == (3.0, 300.0)


class FakeAdmin:
    """Answers the listing calls list_live_topics makes."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def tenants(self) -> list[str]:
        return ["acme", "pulsar", "public"]

    def namespaces(self, tenant: str) -> list[str]:
        self.calls.append(f"namespaces {tenant}")
        return {
            "acme": ["acme/app", "acme/web"],
            "public": ["public/default", "public/functions"],
            "pulsar": ["pulsar/system"],
        }[tenant]

    def list_partitioned_topics(self, namespace: str) -> list[str]:
        return {"acme/app": ["persistent://acme/app/big"]}.get(namespace, [])

    def list_topics(self, namespace: str) -> list[str]:
        return {
            "acme/app": [
                "persistent://acme/app/big-partition-0",
                "persistent://acme/app/big-partition-1",
                "persistent://acme/app/small",
                "persistent://acme/app/__change_events",
            ],
            "acme/web": ["persistent://acme/web/page"],
            "public/default": ["persistent://public/default/x"],
            "public/functions": ["persistent://public/functions/assignments"],
        }.get(namespace, [])


def listed(selection: TopicSelection) -> list[LiveTopic]:
    admin: Any = FakeAdmin()
    return list_live_topics(admin, selection)


def test_listing_counts_a_partitioned_topic_once_and_skips_system_topics() -> None:
    assert listed(TopicSelection()) == [
        LiveTopic("persistent://acme/app/big", True),
        LiveTopic("persistent://acme/app/small", False),
        LiveTopic("persistent://acme/web/page", False),
        LiveTopic("persistent://public/default/x", False),
    ]


def test_listing_by_namespace_tenant_and_regex() -> None:
    assert [t.name for t in listed(TopicSelection(namespaces=("acme/web",)))] == [
        "persistent://acme/web/page"
    ]
    assert [t.name for t in listed(TopicSelection(tenants=("public",)))] == ["persistent://public/default/x"]
    by_regex = listed(TopicSelection(tenants=("acme",), regex=r"persistent://acme/app/.*"))
    assert [t.name for t in by_regex] == ["persistent://acme/app/big", "persistent://acme/app/small"]
    # the regex must match the whole name
    assert listed(TopicSelection(tenants=("acme",), regex="big")) == []


def test_selection_is_validated_naming_the_option() -> None:
    with pytest.raises(ConfigError, match="--namespace 'acme' must be tenant/namespace"):
        TopicSelection(namespaces=("acme",))
    with pytest.raises(ConfigError, match="--topics-regex '\\(' is not a regular expression"):
        TopicSelection(regex="(")

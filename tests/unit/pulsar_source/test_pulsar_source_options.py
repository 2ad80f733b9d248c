"""Options are validated up front; every error names the option."""

from __future__ import annotations

import json
import pickle

import pytest

from widehouse.errors import ConfigError
from widehouse.pulsar.positions import Position, TopicPartition
from widehouse.settings import PulsarSettings
from widehouse.source.broker import TopicSelector, ledger_list
from widehouse.source.offsets import PositionSpec
from widehouse.source.options import NO_LIMIT, parse_options, source_options

PULSAR = PulsarSettings("pulsar://broker:6650", "http://broker:8080", "secret-token")
A = "persistent://t/ns/a"


def parse(**options: str) -> object:
    return parse_options(options, PULSAR)


def test_defaults_come_from_settings_and_are_documented_values() -> None:
    o = parse_options({"topics": A, "appId": "g1"}, PULSAR)
    assert o.pulsar == PULSAR
    assert o.starting.default == PositionSpec("latest") and o.ending is None
    assert o.fail_on_data_loss is True
    assert o.limits.max_per_trigger is None and o.limits.min_per_topic == 1000
    assert o.limits.cut_slack == 0.0  # exact takes unless asked (the stream job asks)
    assert o.durable_subscription and o.subscription_prefix == "widehouse-"
    assert o.heartbeat_interval_s == 600
    batch = parse_options({"topics": A}, PULSAR, batch=True)
    assert batch.starting.default == PositionSpec("earliest")
    assert batch.ending is not None and batch.ending.default == PositionSpec("latest")


def test_options_are_case_insensitive_and_override_settings() -> None:
    o = parse_options(
        {
            "TOPICS": f"{A}, {A}-partition-2",
            "serviceurl": "pulsar+ssl://other:6651",
            "adminUrl": "https://other:8443/",
            "maxMessagesPerTrigger": "5000",
            "maxMessagesPerTopic": json.dumps({A: 100, "*": 50}),
            "minMessagesPerTrigger": "10",
            "maxTriggerDelay": "30s",
            "CUTSLACK": "0.25",
            "readTimeout": "2m",
            "startingOffsets": json.dumps({A: {"0": "5:6"}}),
        },
        PULSAR,
    )
    assert o.selector.topics == (A, f"{A}-partition-2")
    assert o.pulsar == PulsarSettings("pulsar+ssl://other:6651", "https://other:8443", "secret-token")
    assert o.limits.max_per_trigger == 5000 and o.limits.cap(A) == 100 and o.limits.cap("x") == 50
    assert o.limits.min_per_trigger == 10 and o.limits.max_trigger_delay_ms == 30_000
    assert o.limits.cut_slack == 0.25
    assert o.read_timeout_ms == 120_000
    assert o.starting.for_partition(TopicPartition(A, 0)) == PositionSpec("at", Position(5, 6))
    assert pickle.loads(pickle.dumps(o)) == o  # shipped to the stream reader process and executors


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "option topics .* or topicsPattern is required"),
        ({"topics": A, "topicsPattern": "x"}, "topics and topicsPattern exclude each other"),
        ({"topics": "a,b"}, "option topics: 'a' is not a full Pulsar topic name"),
        ({"topics": "non-persistent://t/ns/a"}, "is not persistent"),
        ({"topicsPattern": "x.*"}, "topicsPattern needs option namespaces"),
        ({"topicsPattern": "(", "namespaces": "t/ns"}, "topicsPattern='\\(' is not a regular expression"),
        ({"topicsPattern": "x", "namespaces": "tns"}, "namespaces: 'tns' is not tenant/namespace"),
        ({"topics": A, "namespaces": "t/ns"}, "namespaces goes with topicsPattern"),
        ({"topics": A, "serviceUrl": "http://x"}, "serviceUrl='http://x' must be pulsar://"),
        ({"topics": A, "adminUrl": "pulsar://x"}, "adminUrl='pulsar://x' must be http"),
        ({"topics": A, "startingOffsets": "newest"}, "startingOffsets='newest' is invalid"),
        ({"topics": A, "failOnDataLoss": "maybe"}, "failOnDataLoss='maybe' must be true or false"),
        ({"topics": A, "maxMessagesPerTrigger": "-5"}, "maxMessagesPerTrigger='-5' must be >= 1"),
        ({"topics": A, "maxMessagesPerTrigger": "lots"}, "maxMessagesPerTrigger='lots' is not an integer"),
        ({"topics": A, "maxMessagesPerTopic": '{"x": 1}'}, "maxMessagesPerTopic: 'x' is not a full"),
        ({"topics": A, "maxMessagesPerTopic": json.dumps({A: -1})}, "needs a count >= 0"),
        ({"topics": A, "maxTriggerDelay": "5m"}, "maxTriggerDelay goes with minMessagesPerTrigger"),
        ({"topics": A, "readTimeout": "soon"}, "readTimeout='soon' is not a duration"),
        ({"topics": A, "cutSlack": "0.6"}, "cutSlack='0.6' must be between 0 and 0.5"),
        ({"topics": A, "cutSlack": "-0.1"}, "cutSlack='-0.1' must be between 0 and 0.5"),
        ({"topics": A, "cutSlack": "some"}, "cutSlack='some' is not a number"),
        ({"topics": A, "appId": "bad id!"}, "appId='bad id!' is invalid"),
        ({"topics": A, "subscriptionPrefix": "a b"}, "subscriptionPrefix"),
        ({"topics": A, "maxOffsetsPerTrigger": "5"}, "unknown option 'maxOffsetsPerTrigger'"),
    ],
)
def test_bad_options_fail_with_the_option_named(options: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_options(options, PULSAR)


def test_streams_need_an_app_id_and_no_ending_offsets() -> None:
    with pytest.raises(ConfigError, match="option appId is required for a streaming query"):
        parse_options({"topics": A}, PULSAR).for_stream()
    parse_options({"topics": A, "durableSubscription": "false"}, PULSAR).for_stream()
    with pytest.raises(ConfigError, match="endingOffsets is for batch reads"):
        parse_options({"topics": A, "appId": "g", "endingOffsets": "latest"}, PULSAR).for_stream()


def test_source_options_helper_builds_valid_strings() -> None:
    options = source_options(
        PULSAR,
        [A, "persistent://t/ns/b"],
        appId="group-7",
        failOnDataLoss=False,
        maxMessagesPerTopic={A: 10},
        maxMessagesPerTrigger=1000,
        minTasks=None,
    )
    assert options == {
        "topics": f"{A},persistent://t/ns/b",
        "serviceUrl": PULSAR.service_url,
        "adminUrl": PULSAR.admin_url,
        "authToken": "secret-token",
        "appId": "group-7",
        "failOnDataLoss": "false",
        "maxMessagesPerTopic": json.dumps({A: 10}),
        "maxMessagesPerTrigger": "1000",
    }
    with pytest.raises(ConfigError, match="maxMessagesPerTrigger"):
        source_options(PULSAR, [A], maxMessagesPerTrigger=0)
    by_pattern = source_options(PULSAR, [], topicsPattern="dots-.*", namespaces="t/ns", appId="g")
    assert "topics" not in by_pattern and by_pattern["topicsPattern"] == "dots-.*"
    with pytest.raises(ConfigError, match=r"option topics .* or topicsPattern is required"):
        source_options(PULSAR, [])


def test_read_config_carries_only_what_executors_need() -> None:
    o = parse_options({"topics": A, "failOnDataLoss": "false", "receiverQueueSize": "50"}, PULSAR)
    config = o.read_config
    assert (config.service_url, config.auth_token) == (PULSAR.service_url, "secret-token")
    assert config.fail_on_data_loss is False and config.receiver_queue_size == 50
    assert "secret-token" not in repr(config)
    assert NO_LIMIT > 10**15


def test_explicit_topics_select_whole_topics_and_single_partitions_from_a_listing() -> None:
    selector = TopicSelector(topics=(A, "persistent://t/ns/b-partition-1", "persistent://t/ns/plain"))
    listed = [
        f"{A}-partition-0",
        f"{A}-partition-1",
        "persistent://t/ns/b-partition-0",
        "persistent://t/ns/b-partition-1",
        "persistent://t/ns/plain",
        "persistent://t/ns/other-partition-0",
    ]
    expected = {
        TopicPartition(A, 0),
        TopicPartition(A, 1),
        TopicPartition("persistent://t/ns/b", 1),
        TopicPartition("persistent://t/ns/plain", -1),
    }
    assert selector.select(listed) == expected
    # asked again (every trigger), and after a trip to another process: the same answer
    assert selector.select(listed) == expected
    assert pickle.loads(pickle.dumps(selector)).select(reversed(listed)) == expected
    assert selector.select([]) == set()


def test_a_pattern_selects_by_local_name_and_skips_system_topics() -> None:
    selector = TopicSelector(pattern="_*(a|b)", namespaces=("t/ns",))  # would match __a
    listed = [f"{A}-partition-0", "persistent://t/ns/b", "persistent://t/ns/ab", "persistent://t/ns/__a"]
    assert selector.select(listed) == {TopicPartition(A, 0), TopicPartition("persistent://t/ns/b", -1)}


def test_a_ledger_list_counts_the_open_ledger_to_its_last_confirmed_entry() -> None:
    # internal stats as the broker answers them (trimmed): the open ledger's own count is not final
    stats = json.loads(
        '{"ledgers": [{"ledgerId": 12, "entries": 40, "size": 9000}, {"ledgerId": 19, "entries": 0}],'
        ' "lastConfirmedEntry": "19:6", "cursors": {}}'
    )
    assert ledger_list(stats) == [(12, 40), (19, 7)]
    assert ledger_list({"ledgers": [], "lastConfirmedEntry": "-1:-1"}) == []
    assert ledger_list({"ledgers": [{"ledgerId": 3, "entries": 5}]}) == [(3, 5)]

from __future__ import annotations

import pytest

from widehouse.errors import PulsarError
from widehouse.pulsar import TopicName


def test_parse_and_format() -> None:
    t = TopicName.parse("persistent://bigo/live/gift")
    assert (t.domain, t.tenant, t.namespace, t.local) == ("persistent", "bigo", "live", "gift")
    assert str(t) == "persistent://bigo/live/gift"
    assert t.full_namespace == "bigo/live"
    assert t.rest_path == "persistent/bigo/live/gift"


def test_partitions() -> None:
    t = TopicName.parse("persistent://a/b/c")
    assert [str(p) for p in t.partitions(2)] == [
        "persistent://a/b/c-partition-0",
        "persistent://a/b/c-partition-1",
    ]
    assert t.partitions(0) == [t]
    p = TopicName.parse("persistent://a/b/c-partition-7")
    assert p.partition_index == 7
    assert p.base == t
    assert t.partition_index is None


@pytest.mark.parametrize("bad", ["gift", "persistent://a/b", "kafka://a/b/c", "persistent://a/b/c d", ""])
def test_bad_names_are_rejected_with_the_name(bad: str) -> None:
    with pytest.raises(PulsarError, match="is not a full Pulsar topic name"):
        TopicName.parse(bad)

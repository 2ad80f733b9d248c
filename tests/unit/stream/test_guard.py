"""A group whose sinks are ahead of its checkpoint (lost or reset) is refused, with a message that
names the app, the group, both numbers and the recovery."""

from __future__ import annotations

import pytest

from widehouse.errors import CheckpointError
from widehouse.stream.guard import check_checkpoint


@pytest.mark.parametrize(
    ("planned", "sinks"),
    [
        (None, {"clickhouse": None, "delta": None}),  # a new group
        (4, {"clickhouse": 4, "delta": 4}),  # crashed after the sinks, before Spark's commit
        (4, {"clickhouse": 3, "delta": 4}),  # crashed between the sinks
        (4, {"clickhouse": 3}),  # only one sink configured
        (7, {}),  # no sink asked
    ],
)
def test_a_checkpoint_at_or_ahead_of_the_sinks_starts(
    planned: int | None, sinks: dict[str, int | None]
) -> None:
    check_checkpoint("app1", "g001", "/ck/app1/g001", planned, sinks)


def test_a_lost_checkpoint_is_refused_naming_both_numbers() -> None:
    with pytest.raises(CheckpointError) as caught:
        check_checkpoint("app1", "g001", "/ck/app1/g001", None, {"clickhouse": 12, "delta": 11})
    message = str(caught.value)
    assert "'g001'" in message
    assert "'app1'" in message
    assert "clickhouse batch 12" in message
    assert "delta batch 11" in message
    assert "/ck/app1/g001 is empty or missing" in message
    assert "WIDEHOUSE_STREAM_APP" in message
    assert "--starting-offsets" in message


def test_a_reset_checkpoint_behind_one_sink_is_refused() -> None:
    with pytest.raises(CheckpointError, match=r"delta batch 9.*planned batches only up to 2"):
        check_checkpoint("app1", "g002", "/ck/app1/g002", 2, {"clickhouse": None, "delta": 9})

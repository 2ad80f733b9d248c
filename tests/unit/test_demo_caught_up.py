"""When the demo stops waiting for its streams: every message published read, however the last
batches fell around the publisher's end."""

from __future__ import annotations

import datetime as dt

from widehouse.demo.spark import caught_up

END = dt.datetime(2026, 12, 7, 23, 6, 1, tzinfo=dt.UTC).timestamp()  # the publisher finished
BEFORE = dt.datetime(2026, 12, 7, 23, 6, 0, 200_000)  # ClickHouse hands back naive UTC times
AFTER = dt.datetime(2026, 12, 7, 23, 6, 10, 100_000)


def test_last_batches_planned_after_publishing_ended_with_no_lag() -> None:
    rows = [("g001", 0, AFTER, 90_000, 1, 2), ("g002", 0, AFTER, 80_000, 1, 2)]
    assert caught_up(rows, 2, END, sent=180_000)  # planned after the end: no count needed


def test_a_last_batch_planned_before_the_end_that_read_everything() -> None:
    """The demo's 13-minute run: both groups' last batches read all 180,000 messages before the
    publisher had written its manifest, and no batch followed them."""
    rows = [("g001", 0, BEFORE, 95_000, 1, 2), ("g002", 0, BEFORE, 85_000, 1, 2)]
    assert caught_up(rows, 2, END, sent=180_000)


def test_not_yet() -> None:
    early = [("g001", 0, BEFORE, 95_000, 1, 2), ("g002", 0, BEFORE, 84_000, 1, 2)]
    assert not caught_up(early, 2, END, sent=180_000)  # 1,000 messages still unread
    assert not caught_up(early[:1], 2, END, sent=95_000)  # a group that never reported
    lagging = [("g001", 0, AFTER, 95_000, 1, 2), ("g002", 7, AFTER, 85_000, 1, 2)]
    assert not caught_up(lagging, 2, END, sent=180_000)
    assert not caught_up([("g001", 0, BEFORE, 95_000, 1, 2)], 1, END, sent=None)  # nothing to count

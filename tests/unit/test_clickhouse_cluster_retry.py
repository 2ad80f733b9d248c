"""What a quorum insert or a sequentially consistent read retries on a ClickHouse cluster: only the
"not yet" errors (another quorum write in flight, a replica behind the last quorum write, a timed-out
quorum write of unknown outcome), a bounded number of times. The messages are ClickHouse's own
(ErrorCodes 286, 289, 319 and their texts in ReplicatedMergeTreeSink / StorageReplicatedMergeTree)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from clickhouse_connect.driver.exceptions import DatabaseError

from widehouse.clickhouse.client import RETRIED_ERRORS, retried_error, retry_not_yet

QUORUM_BUSY = (
    "HTTPDriver for http://ch-1:8123 received ClickHouse error code 286\n Code: 286. DB::Exception: "
    "Quorum for previous write has not been satisfied yet. Status: version: 1 part_name: "
    "20261122_3_3_0 required_number_of_replicas: 2. (UNSATISFIED_QUORUM_FOR_PREVIOUS_WRITE) "
    "(version 24.8.4.13)"
)
LAGGING = (
    "Code: 289. DB::Exception: Replica doesn't have part 20261122_7_7_0 which was successfully "
    "written to quorum of other replicas. Send query to another replica or disable "
    "'select_sequential_consistency' setting. (REPLICA_IS_NOT_IN_QUORUM)"
)
UNKNOWN = (
    "Code: 319. DB::Exception: Unknown status, client must retry. Reason: Timeout while waiting for quorum."
)
OTHER = "Code: 60. DB::Exception: Table wh.finalized_periods does not exist. (UNKNOWN_TABLE)"


def failing(errors: list[str], result: str = "done") -> tuple[Callable[[], str], list[int]]:
    calls: list[int] = []

    def call() -> str:
        calls.append(1)
        if len(calls) <= len(errors):
            raise DatabaseError(errors[len(calls) - 1])
        return result

    return call, calls


def test_the_not_yet_errors_are_recognised_by_name_or_code() -> None:
    assert retried_error(DatabaseError(QUORUM_BUSY)) == "UNSATISFIED_QUORUM_FOR_PREVIOUS_WRITE"
    assert retried_error(DatabaseError(LAGGING)) == "REPLICA_IS_NOT_IN_QUORUM"
    assert retried_error(DatabaseError(UNKNOWN)) == "UNKNOWN_STATUS_OF_INSERT"
    assert retried_error(DatabaseError(OTHER)) is None
    assert retried_error(DatabaseError("Code: 2860. something else")) is None
    assert set(RETRIED_ERRORS.values()) == {286, 289, 319}


def test_not_yet_is_retried_until_it_succeeds() -> None:
    slept: list[float] = []
    call, calls = failing([QUORUM_BUSY, LAGGING, UNKNOWN])
    assert retry_not_yet(call, "test", delays=(0.1, 0.2, 0.4, 0.8), sleep=slept.append) == "done"
    assert len(calls) == 4 and slept == [0.1, 0.2, 0.4]


def test_other_errors_are_not_retried() -> None:
    slept: list[float] = []
    call, calls = failing([OTHER])
    with pytest.raises(DatabaseError, match="UNKNOWN_TABLE"):
        retry_not_yet(call, "test", delays=(0.1, 0.2), sleep=slept.append)
    assert len(calls) == 1 and slept == []


def test_the_last_not_yet_error_propagates_after_the_delays() -> None:
    slept: list[float] = []
    call, calls = failing([LAGGING] * 5)
    with pytest.raises(DatabaseError, match="REPLICA_IS_NOT_IN_QUORUM"):
        retry_not_yet(call, "test", delays=(0.1, 0.2), sleep=slept.append)
    assert len(calls) == 3 and slept == [0.1, 0.2]

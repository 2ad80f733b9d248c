"""write_stream_batches: each row put once, each bucket finished once, in order (pure logic; the
HBase side is tests/integration/test_hbase.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import pyarrow as pa
import pytest

from widehouse.errors import HBaseError
from widehouse.hbase.day import FamilyWrite
from widehouse.hbase.refresh import write_stream_batches


@dataclass
class Recorder:
    buckets: int
    puts: list[list[int]] = field(default_factory=list)
    finished: list[int] = field(default_factory=list)

    @property
    def spec(self) -> SimpleNamespace:
        return SimpleNamespace(name="t", buckets=self.buckets)

    def put(self, rows: pa.Table) -> None:
        self.puts.append(rows["uid"].to_pylist())

    def finish_bucket(self, bucket: int) -> int:
        self.finished.append(bucket)
        return 0

    @property
    def result(self) -> FamilyWrite:
        return FamilyWrite(rows=sum(len(p) for p in self.puts), pruned=0)


def _batch(pairs: list[tuple[int, int]]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"uid": [u for u, _ in pairs], "_bucket": [b for _, b in pairs]})


def test_a_block_starting_past_the_first_bucket_is_put_once() -> None:
    writer = Recorder(buckets=4)
    # written by hand: bucket 0 is empty; block 1 holds bucket 1 only; block 2 buckets 1 and 3
    write_stream_batches(writer, [_batch([(10, 1), (11, 1)]), _batch([(12, 1), (13, 3)])])  # type: ignore[arg-type]
    assert sorted(uid for put in writer.puts for uid in put) == [10, 11, 12, 13]
    assert writer.finished == [0, 1, 2, 3]


def test_blocks_out_of_bucket_order_are_refused() -> None:
    with pytest.raises(HBaseError, match="out of salt-bucket order"):
        write_stream_batches(Recorder(buckets=4), [_batch([(1, 2)]), _batch([(2, 1)])])  # type: ignore[arg-type]


def test_a_span_finishes_only_its_own_buckets() -> None:
    writer = Recorder(buckets=8)
    # a worker's query for buckets 3-5: bucket 3 empty, rows in 4 and 5
    write_stream_batches(writer, [_batch([(20, 4), (21, 5)])], range(3, 6))  # type: ignore[arg-type]
    assert sorted(uid for put in writer.puts for uid in put) == [20, 21]
    assert writer.finished == [3, 4, 5]


def test_rows_outside_the_span_are_refused() -> None:
    with pytest.raises(HBaseError, match="outside buckets 2-2 \\(bucket 3\\)"):
        write_stream_batches(Recorder(buckets=4), [_batch([(1, 3)])], range(2, 3))  # type: ignore[arg-type]
    with pytest.raises(HBaseError, match="outside buckets 2-2 \\(bucket 1\\)"):
        write_stream_batches(Recorder(buckets=4), [_batch([(1, 1)])], range(2, 3))  # type: ignore[arg-type]

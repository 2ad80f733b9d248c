"""write_stream_batches: each row put once, each bucket finished once, in order (pure logic; the
HBase side is tests/integration/test_hbase.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import pyarrow as pa
import pytest

from widehouse.errors import HBaseError
from widehouse.hbase.day import FamilyWrite, write_stream_batches


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

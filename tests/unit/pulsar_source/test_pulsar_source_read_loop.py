"""The read loop (widehouse.source.reader._read_slice) over stand-in messages: which rows a slice
keeps, where it stops when messages are gone, and that a message's id is taken only where the
order of the partition leaves a doubt (the slice's start, the end of each run of reads), not for
every message. The same loop against the real broker: tests/integration/test_pulsar_source_broker.py."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from tests.fake_pulsar import FakeMessage, FakeReader, id_calls
from widehouse.pulsar.positions import Mark, Position
from widehouse.source.broker import DataLossError
from widehouse.source.messages import Messages
from widehouse.source.options import ReadConfig
from widehouse.source.planning import Slice
from widehouse.source.reader import _Chunks, _read_slice

TOPIC = "persistent://t/ns/events"


def _config(rows: int = 10_000, fail_on_data_loss: bool = True) -> ReadConfig:
    return ReadConfig("pulsar://unused:6650", arrow_batch_rows=rows, fail_on_data_loss=fail_on_data_loss)


def _read(messages: Iterable[FakeMessage], piece: Slice, config: ReadConfig) -> tuple[list[Messages], bool]:
    """Every chunk the loop hands out (the one left unfinished last) and whether the slice was whole."""
    chunks = _Chunks()
    loop = _read_slice(FakeReader(messages), piece, chunks, config)
    out: list[Messages] = []
    while True:
        try:
            out.append(next(loop))
        except StopIteration as done:
            return [*out, chunks.current], done.value


def _entries(chunk: Messages) -> list[tuple[int, int, int]]:
    return [m.position for m in chunk.messages]


def test_ids_are_taken_at_the_start_and_at_each_chunk_end_only() -> None:
    """A kept reader two entries behind the slice's start: the skipped messages and the first one in
    the slice are checked one by one, then only the last message of every chunk."""
    messages = [FakeMessage(5, e, data=b"e%d" % e, publish_ms=1_000 + e) for e in range(2, 30)]
    piece = Slice(TOPIC, 3, Mark(Position(5, 4), 4), Mark(Position(5, 24), 24))  # entries 5..24
    chunks, whole = _read(messages, piece, _config(rows=8))
    assert whole
    assert [[e for _l, e, _b in _entries(c)] for c in chunks] == [
        list(range(5, 13)),
        list(range(13, 21)),
        list(range(21, 25)),
    ]
    assert [c.runs for c in chunks] == [[(TOPIC, 3, 8)], [(TOPIC, 3, 8)], [(TOPIC, 3, 4)]]
    assert chunks[0].values[:2] == [b"e5", b"e6"] and chunks[2].publish_ms[-1] == 1_024
    taken = {(5, e, -1): 1 for e in (2, 3, 4, 5, 12, 20, 24)}  # before the start, first in, chunk ends
    assert id_calls(messages) == taken
    # the id of any row, when asked: ledger:entry:partition:batch
    assert chunks[1].message_id(3) == "5:16:3:-1" and chunks[2].message_id(0) == "5:21:3:-1"


def test_batch_indexes_at_both_ends_of_a_slice() -> None:
    """Start through 5:1:1 (the reader resumes at entry 5:1); end at the whole entry 5:3."""
    messages = [FakeMessage(5, e, b) for e in range(1, 5) for b in range(3)]
    piece = Slice(TOPIC, -1, Mark(Position(5, 1, 1), 10), Mark(Position(5, 3), 17))  # 5:1:2 .. 5:3:2
    chunks, whole = _read(messages, piece, _config())
    assert whole
    assert _entries(chunks[0]) == [
        (5, 1, 2),
        (5, 2, 0),
        (5, 2, 1),
        (5, 2, 2),
        (5, 3, 0),
        (5, 3, 1),
        (5, 3, 2),
    ]
    assert id_calls(messages) == {(5, 1, 0): 1, (5, 1, 1): 1, (5, 1, 2): 1, (5, 3, 2): 1}
    assert chunks[0].message_id(0) == "5:1:-1:2"


def _gappy() -> list[FakeMessage]:
    """Entries 0..4, 8, 9, 12..15 of ledger 5 (5..7 and 10, 11 gone)."""
    return [FakeMessage(5, e, data=b"e%d" % e) for e in (0, 1, 2, 3, 4, 8, 9, 12, 13, 14, 15)]


def test_lost_messages_stop_the_slice_at_the_first_message_past_its_end() -> None:
    """10 messages expected up to 5:9; 3 are gone, so the 10 reads run to 5:14: the rows past the end
    (5:12, 5:13, 5:14) are dropped and the loss names the first of them."""
    piece = Slice(TOPIC, 0, Mark(None, -1), Mark(Position(5, 9), 9))
    messages = _gappy()
    chunks, whole = _read(messages, piece, _config(fail_on_data_loss=False))
    assert not whole
    assert [e for _l, e, _b in _entries(chunks[0])] == [0, 1, 2, 3, 4, 8, 9]
    assert chunks[0].values == [b"e0", b"e1", b"e2", b"e3", b"e4", b"e8", b"e9"]
    assert len(chunks[0].publish_ms) == 7 and chunks[0].runs == [(TOPIC, 0, 7)]
    assert sum(id_calls(messages).values()) <= 6  # the last read, then a binary search over 10
    with pytest.raises(DataLossError, match=r"3 of 10 messages .* \(reached 5:12:-1, past the end\)"):
        _read(_gappy(), piece, _config())


def test_rows_past_the_end_take_their_metadata_with_them() -> None:
    """With the metadata read, dropping the rows past the end drops their keys and properties too."""
    messages = [
        FakeMessage(5, e, key=f"k{e}", event_ms=e, properties={"p": str(e)} if e % 2 else {})
        for e in (0, 1, 2, 7, 8)
    ]
    piece = Slice(TOPIC, 0, Mark(None, -1), Mark(Position(5, 3), 3))
    chunks, whole = _read(messages, piece, _config(fail_on_data_loss=False))
    chunk = chunks[0]
    assert not whole and len(chunk) == 3
    assert chunk.keys == ["k0", "k1", "k2"] and chunk.event == [0, 1, 2]
    assert chunk.prop_offsets == [0, 0, 1, 1] and chunk.prop_keys == ["p"] and chunk.prop_values == ["1"]

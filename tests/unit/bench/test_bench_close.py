"""A bench closes the Pulsar readers its process keeps before it drops its tenants.

``bench read_transform`` reads in the bench's own process, and the source keeps those readers
between tasks. Dropped after its tenants, each kept reader looked its deleted topic up again and
again (145 "Lookup failed" lines at the end of one run) until the janitor's sweep. The broker and
ClickHouse are stood in for here: this pins the order of the steps; closing real readers is
``test_pulsar_source_broker``'s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench import stream_wide
from widehouse.pulsar.positions import Mark
from widehouse.source import reader as reader_module


class _Reader:
    def __init__(self, steps: list[str]) -> None:
        self.steps = steps

    def close(self) -> None:
        self.steps.append("reader closed")


def test_close_shuts_the_kept_readers_before_dropping_the_tenants(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps: list[str] = []
    kept = type(reader_module._KEPT)()
    kept[("pulsar://x", None, "persistent://t-b1/app/a")] = (_Reader(steps), Mark(None, 0), 0.0)
    monkeypatch.setattr(reader_module, "_KEPT", kept)

    def drop_tenants(_settings: Any, suffixes: list[str]) -> int:
        steps.append(f"tenants {suffixes} dropped")
        return len(suffixes)

    monkeypatch.setattr(stream_wide, "drop_tenants", drop_tenants)
    monkeypatch.setattr(stream_wide, "drop_databases", lambda _settings, names: 0)
    bench = stream_wide.Bench(tmp_path / "bench")
    bench.suffixes.add("b1")
    bench.close()
    assert steps == ["reader closed", "tenants ['b1'] dropped"]
    assert not reader_module._KEPT

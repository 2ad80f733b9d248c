"""The freshness part ends, and stops its app, when the generator of the timed traffic fails.

It used to publish from a thread that signalled only after the generator returned: a generator that
raised left the part waiting forever. The app and the broker are stood in for here; the part's real
run is ``python -m bench stream_wide --parts freshness``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench import stream_wide
from widehouse.generator import run as generator_run


class _Counts:
    sent = 200


class _Manifest:
    def counts(self) -> _Counts:
        return _Counts()


@pytest.mark.timeout(30)
def test_a_failing_generator_ends_the_part_and_stops_the_app(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[Any] = []

    def generate(_settings: Any, options: Any) -> _Manifest:
        calls.append(options)
        if options.duration_s:  # the timed traffic, after the set-up burst
            raise RuntimeError("broker gone")
        return _Manifest()

    steps: list[str] = []

    def run_app(_settings: Any, _topics: list[str], available_now: bool = True, until: Any = None) -> Any:
        assert not available_now
        try:
            until(object())
        finally:
            steps.append("app stopped")

    monkeypatch.setattr(generator_run, "generate", generate)
    monkeypatch.setattr(stream_wide, "_run_app", run_app)
    bench = stream_wide.Bench(tmp_path / "bench")
    with pytest.raises(RuntimeError, match="broker gone"):
        stream_wide.part_freshness(bench, rate=1000, seconds=1, trigger=1)
    assert steps == ["app stopped"]
    assert len(calls) == 2

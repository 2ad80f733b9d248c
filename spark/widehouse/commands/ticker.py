"""A status line that rewrites itself on a terminal: what long commands show while they run.

Only on a terminal: piped or logged output gets nothing from it (the command's summary at the end
says it all), so scripts and CI logs stay clean.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Ticker:
    """Shows the latest status on one line, at most every ``every`` seconds."""

    def __init__(self, stream: TextIO | None = None, every: float = 0.5, enabled: bool | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.every = every
        self.enabled = _is_terminal(self.stream) if enabled is None else enabled
        self._shown_at: float | None = None
        self._width = 0

    def show(self, text: str, force: bool = False) -> None:
        """Replace the line with ``text`` (skipped if the last one is younger than ``every``)."""
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and self._shown_at is not None and now - self._shown_at < self.every:
            return
        self._shown_at = now
        pad = " " * max(0, self._width - len(text))  # wipe what a longer line left behind
        self._width = len(text)
        self.stream.write(f"\r{text}{pad}")
        self.stream.flush()

    def done(self) -> None:
        """End the line (the command's own output follows on the next)."""
        if self.enabled and self._shown_at is not None:
            self.stream.write("\n")
            self.stream.flush()
            self._shown_at = None
            self._width = 0


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or unusual stream: no terminal
        return False


def rate_text(done: int, seconds: float, unit: str) -> str:
    """``12,345 msg/s`` (or nothing before the first second)."""
    return f"{done / seconds:,.0f} {unit}/s" if seconds >= 1 else ""

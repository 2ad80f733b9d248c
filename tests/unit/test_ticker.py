"""The terminal status line of long commands: rewritten in place, throttled, silent off a terminal."""

from __future__ import annotations

import io

from widehouse.commands.ticker import Ticker, rate_text


def test_the_line_is_rewritten_in_place_and_padded_over_a_longer_one() -> None:
    out = io.StringIO()
    ticker = Ticker(out, every=0, enabled=True)
    ticker.show("published 10 / 100")
    ticker.show("done 9")
    ticker.done()
    assert out.getvalue() == "\rpublished 10 / 100\rdone 9" + " " * 12 + "\n"


def test_updates_closer_than_the_interval_are_skipped_unless_forced() -> None:
    out = io.StringIO()
    ticker = Ticker(out, every=60, enabled=True)
    ticker.show("a")
    ticker.show("b")
    ticker.show("c", force=True)
    assert out.getvalue() == "\ra\rc"


def test_off_a_terminal_nothing_is_written() -> None:
    out = io.StringIO()  # not a terminal
    ticker = Ticker(out)
    assert not ticker.enabled
    ticker.show("x", force=True)
    ticker.done()
    assert out.getvalue() == ""


def test_rate_text() -> None:
    assert rate_text(50_000, 2.0, "msg") == "25,000 msg/s"
    assert rate_text(10, 0.5, "msg") == ""

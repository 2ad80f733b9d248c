"""``register``: the ``pulsar`` format is registered once per session, however many groups start.

A stand-in for the session (pure logic: which calls reach Spark). A stream app calls it once per
group; Spark warned that ``pulsar`` "replaced a previously registered data source" for each group
after the first."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest

from widehouse.source.spark import PulsarDataSource, register


class _Session:
    """What ``register`` touches: ``dataSource.register`` and the JVM's ``PYSPARK_PYTHON``."""

    def __init__(self, python: str) -> None:
        self.registered: list[Any] = []
        self.dataSource = SimpleNamespace(register=self.registered.append)
        system = SimpleNamespace(getenv=lambda name: python if name == "PYSPARK_PYTHON" else None)
        self.sparkContext = SimpleNamespace(
            _jvm=SimpleNamespace(java=SimpleNamespace(lang=SimpleNamespace(System=system)))
        )


def test_the_format_is_registered_once_per_session() -> None:
    first, second = _Session("/usr/bin/python3"), _Session("/usr/bin/python3")
    for _ in range(3):  # three groups of one app
        register(first)  # type: ignore[arg-type]
    assert first.registered == [PulsarDataSource]
    register(second)  # type: ignore[arg-type]
    assert second.registered == [PulsarDataSource]


def test_the_interpreter_warning_comes_once_per_session(caplog: pytest.LogCaptureFixture) -> None:
    session = _Session("")
    with caplog.at_level(logging.WARNING, logger="widehouse.pulsar.source"):
        register(session)  # type: ignore[arg-type]
        register(session)  # type: ignore[arg-type]
    assert sum("PYSPARK_PYTHON is not set" in r.getMessage() for r in caplog.records) == 1


def test_groups_starting_side_by_side_register_the_format_once() -> None:
    """A stream app starts its groups from threads of their own (``StreamApp._start_all``)."""
    import threading
    import time

    session = _Session("/usr/bin/python3")
    slow = session.registered.append

    def register_slowly(source: Any) -> None:  # Spark's call takes a while: the threads overlap
        time.sleep(0.05)
        slow(source)

    session.dataSource = SimpleNamespace(register=register_slowly)
    threads = [threading.Thread(target=register, args=(session,)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert session.registered == [PulsarDataSource]

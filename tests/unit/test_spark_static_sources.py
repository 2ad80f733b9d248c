"""When Spark's look-up of installed Python data sources is answered in this process, and when not."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from widehouse.spark import static_sources


class _Option:
    def __init__(self, value: Any = None) -> None:
        self.value = value

    def isEmpty(self) -> bool:
        return self.value is None


class _Manager:
    """Spark's ``DataSourceManager`` object as py4j shows it: the cached answer and its setter."""

    def __init__(self) -> None:
        self.answer = _Option()
        self.sets = 0

    def dataSourceBuilders(self) -> _Option:
        return self.answer

    def set(self, value: _Option) -> None:
        self.answer = value
        self.sets += 1


class _Jvm:
    def __init__(self, manager: _Manager | None, environment: dict[str, str]) -> None:
        self.manager = manager
        system = type("System", (), {"getenv": staticmethod(environment.get)})
        self.java = type("Java", (), {"lang": type("Lang", (), {"System": system})})

    def __getattr__(self, name: str) -> Any:
        if name == static_sources.MANAGER:
            if self.manager is None:
                raise AttributeError(name)  # another Spark: no such object
            return type("Module", (), {"MODULE$": self.manager})
        if name == "scala.collection.immutable.Map$":
            return type("Module", (), {"MODULE$": type("M", (), {"empty": staticmethod(lambda: {})})})
        if name == "scala.Some$":
            return type("Module", (), {"MODULE$": type("S", (), {"apply": staticmethod(_Option)})})
        raise AttributeError(name)


def _session(manager: _Manager | None, planners: str | None = None) -> Any:
    """A session whose driver JVM was started with ``PYSPARK_PYTHON=planners`` (None: unset)."""
    if manager is not None:
        setattr(manager, "dataSourceBuilders_$eq", manager.set)
    environment = {} if planners is None else {"PYSPARK_PYTHON": planners}
    context = type("Context", (), {"_jvm": _Jvm(manager, environment)})()
    return type("Session", (), {"sparkContext": context})()


def test_no_installed_data_source_is_answered_once() -> None:
    manager = _Manager()
    assert static_sources.answer_static_lookup(_session(manager), sys.executable)
    assert manager.answer.value == {} and manager.sets == 1
    assert static_sources.answer_static_lookup(_session(manager), sys.executable)
    assert manager.sets == 1  # already answered: left as it is


def test_a_pyspark_module_on_the_path_is_left_to_spark(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "pyspark_widehouse_probe.py").write_text("DefaultSource = None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert static_sources.static_candidates() == ["pyspark_widehouse_probe"]
    manager = _Manager()
    assert not static_sources.answer_static_lookup(_session(manager), sys.executable)
    assert manager.sets == 0


def test_planners_on_another_interpreter_are_left_to_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    manager = _Manager()
    assert not static_sources.answer_static_lookup(_session(manager), "/usr/bin/python3-elsewhere")
    base = os.path.realpath(sys.executable)  # a virtualenv's base interpreter has other packages
    if base != os.path.abspath(sys.executable):
        assert not static_sources.answer_static_lookup(_session(manager), base)
    assert not static_sources.answer_static_lookup(_session(manager))  # python3 from PATH: unknown
    # the driver JVM's variable counts, not this process's (the JVM kept what it started with)
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    assert static_sources.planner_python(_session(manager, "/usr/bin/python3-elsewhere")) == (
        "/usr/bin/python3-elsewhere"
    )
    assert not static_sources.answer_static_lookup(_session(manager, "/usr/bin/python3-elsewhere"))
    assert static_sources.answer_static_lookup(_session(manager, sys.executable))
    assert manager.sets == 1


def test_a_spark_without_the_field_does_its_own_look_up() -> None:
    assert not static_sources.answer_static_lookup(_session(None), sys.executable)

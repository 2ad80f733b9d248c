"""The environment a block (a driver JVM's start) sees, and the one left after it."""

from __future__ import annotations

import os

import pytest

from widehouse.spark.environ import environ_set


def test_a_block_sees_the_values_and_each_variable_is_restored_after(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WH_TEST_SET", "before")
    monkeypatch.delenv("WH_TEST_UNSET", raising=False)
    with environ_set({"WH_TEST_SET": "inside", "WH_TEST_UNSET": "inside too"}):
        assert (os.environ["WH_TEST_SET"], os.environ["WH_TEST_UNSET"]) == ("inside", "inside too")
        os.environ["WH_TEST_SET"] = "changed by the block"
    assert os.environ["WH_TEST_SET"] == "before"
    assert "WH_TEST_UNSET" not in os.environ


def test_a_failing_block_restores_them_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WH_TEST_UNSET", raising=False)
    with pytest.raises(RuntimeError), environ_set({"WH_TEST_UNSET": "inside"}):
        raise RuntimeError
    assert "WH_TEST_UNSET" not in os.environ


def test_nothing_to_set_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WH_TEST_SET", "before")
    with environ_set({}):
        assert os.environ["WH_TEST_SET"] == "before"
    assert os.environ["WH_TEST_SET"] == "before"

"""A package's names given on first use (widehouse.lazy)."""

from __future__ import annotations

from typing import Any

import pytest

from widehouse.lazy import lazy_attribute


def test_a_name_comes_from_its_module_once_and_is_kept() -> None:
    namespace: dict[str, Any] = {"__name__": "pkg"}
    table = {"dumps": "json"}
    import json

    assert lazy_attribute(namespace, table, "dumps") is json.dumps
    assert namespace["dumps"] is json.dumps  # the package's next look-up finds it without asking


def test_a_name_not_in_the_table_is_an_attribute_error_naming_the_package() -> None:
    namespace: dict[str, Any] = {"__name__": "widehouse.pkg"}
    with pytest.raises(AttributeError, match=r"module 'widehouse.pkg' has no attribute 'nope'"):
        lazy_attribute(namespace, {"dumps": "json"}, "nope")
    assert "nope" not in namespace

"""Names a package gives when first asked for (PEP 562), for packages whose facade must stay light.

A package's ``__init__`` keeps a table of name -> module and delegates its module ``__getattr__``::

    _LAZY = {"load_catalog": "widehouse.catalog.loader"}

    def __getattr__(name: str) -> Any:
        return lazy_attribute(globals(), _LAZY, name)

The module is imported on the first use of one of its names, and the value kept in the package's
namespace, so later look-ups never come back here. Used where a heavy import (YAML, numpy, pyspark)
would otherwise land in processes that never need it: the CLI of every command, Spark's planner
processes.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, MutableMapping
from typing import Any


def lazy_attribute(namespace: MutableMapping[str, Any], modules: Mapping[str, str], name: str) -> Any:
    """``name`` from its module in ``modules`` (imported now), kept in ``namespace`` (the package's
    ``globals()``); AttributeError naming the package for a name the table does not hold."""
    module = modules.get(name)
    if module is None:
        raise AttributeError(f"module {namespace.get('__name__')!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    namespace[name] = value
    return value

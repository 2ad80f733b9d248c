"""This process's environment changed for the span of a block: what pyspark reads, and the driver JVM
it starts inside the block inherits (``SPARK_HOME``, ``PYSPARK_PYTHON``, the fork server's name)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager


@contextmanager
def environ_set(values: Mapping[str, str]) -> Iterator[None]:
    """Inside it, this process's environment holds ``values``; each variable is restored after (unset
    again where it was unset), whatever the block did to it."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

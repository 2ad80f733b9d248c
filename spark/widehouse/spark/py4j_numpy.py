"""pyspark's py4j converters of NumPy values, without the test module they import on first use.

py4j asks every registered input converter about each argument of a call into the JVM. pyspark's
``NumpyScalarConverter`` and ``NumpyArrayConverter`` import ``pyspark.testing.utils`` in
``can_convert`` for its ``have_numpy``, and that module, as it is imported, imports pandas and
pyarrow to check their versions and looks for some twenty test packages (scipy, torch, plotly,
...): ~0.35-0.55 s in the driver's first call with an argument, ``SparkConf``'s, on the path of every
session's start (cProfile, NOTES issue 28).

An object can only be a NumPy value once NumPy is imported, so :class:`NumpyScalars` and
:class:`NumpyArrays` ask ``sys.modules`` instead and answer what pyspark's converters answer; they
convert as pyspark's do (they are those classes). :func:`convert_numpy_without_test_imports` puts
them in py4j's list in place of pyspark's, where pyspark put its own (the array converter first,
ahead of py4j's list converter).
"""

from __future__ import annotations

import sys

from py4j.protocol import INPUT_CONVERTER
from pyspark.sql.types import NumpyArrayConverter, NumpyScalarConverter


class NumpyScalars(NumpyScalarConverter):
    """pyspark's converter of NumPy scalars, importing nothing to recognize one."""

    def can_convert(self, obj: object) -> bool:
        numpy = sys.modules.get("numpy")
        return numpy is not None and isinstance(obj, numpy.generic)


class NumpyArrays(NumpyArrayConverter):
    """pyspark's converter of one-dimensional NumPy arrays, importing nothing to recognize one."""

    def can_convert(self, obj: object) -> bool:
        numpy = sys.modules.get("numpy")
        return numpy is not None and isinstance(obj, numpy.ndarray) and obj.ndim == 1


_SWAPS: dict[type, type] = {NumpyScalarConverter: NumpyScalars, NumpyArrayConverter: NumpyArrays}


def convert_numpy_without_test_imports() -> None:
    """Replace pyspark's registered NumPy converters with :class:`NumpyScalars` and
    :class:`NumpyArrays`, each in its place (idempotent)."""
    for i, converter in enumerate(INPUT_CONVERTER):
        swap = _SWAPS.get(type(converter))
        if swap is not None:
            INPUT_CONVERTER[i] = swap()

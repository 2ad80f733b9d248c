"""pyspark's NumPy converter, swapped for one that imports no test module (no JVM started here;
tests/integration/test_spark.py converts arrays through a real session)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

_PROBE = """
import json, sys
import py4j.protocol as protocol
import pyspark.sql.types as types
if sys.argv[1] == "swapped":
    from widehouse.spark.py4j_numpy import convert_numpy_without_test_imports
    convert_numpy_without_test_imports()
    convert_numpy_without_test_imports()  # twice: still one, in the same place
names = [type(c).__name__ for c in protocol.INPUT_CONVERTER]
answers = [c.can_convert("a string") for c in protocol.INPUT_CONVERTER]  # what a SparkConf call asks
test_module = "pyspark.testing.utils" in sys.modules
import numpy as np
arrays = [c for c in protocol.INPUT_CONVERTER if isinstance(c, types.NumpyArrayConverter)]
scalars = [c for c in protocol.INPUT_CONVERTER if isinstance(c, types.NumpyScalarConverter)]
print(json.dumps({
    "names": names, "answers": answers, "test_module": test_module,
    "one_d": [c.can_convert(np.array([1, 2])) for c in arrays],
    "two_d": [c.can_convert(np.zeros((2, 2))) for c in arrays],
    "list": [c.can_convert([1, 2]) for c in arrays],
    "scalar": [c.can_convert(np.int64(3)) for c in scalars],
    "int": [c.can_convert(3) for c in scalars],
    "converted": [c.convert(np.int64(3), None) for c in scalars],
}))
"""


def _probe(mode: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, mode], capture_output=True, text=True, timeout=120, check=True
    )
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.fixture(scope="module")
def pyspark_own() -> dict[str, object]:
    return _probe("pyspark")


def test_the_swapped_converters_import_no_test_module(pyspark_own: dict[str, object]) -> None:
    # pyspark's own import its test module (pandas, pyarrow, twenty package look-ups) on first use
    assert pyspark_own["test_module"] is True
    swapped = _probe("swapped")
    assert swapped["test_module"] is False
    # in pyspark's places (the array one first, ahead of py4j's list converter), once each
    renamed = {"NumpyArrayConverter": "NumpyArrays", "NumpyScalarConverter": "NumpyScalars"}
    names = pyspark_own["names"]
    assert isinstance(names, list) and names[0] == "NumpyArrayConverter" and "NumpyScalarConverter" in names
    assert swapped["names"] == [renamed.get(n, n) for n in names]
    # answering and converting as pyspark's do
    for key in ("answers", "one_d", "two_d", "list", "scalar", "int", "converted"):
        assert swapped[key] == pyspark_own[key], key
    assert swapped["one_d"] == [True] and swapped["two_d"] == [False] and swapped["list"] == [False]
    assert swapped["scalar"] == [True] and swapped["int"] == [False] and swapped["converted"] == [3]

"""Only leaves named ``spark`` import pyspark: DAGs, the CLI and executors' pure code stay light."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import widehouse


def is_spark_leaf(name: str) -> bool:
    """``widehouse.<domain>.spark`` (module or package, and anything below it), or the session factory."""
    parts = name.split(".")
    return "spark" in parts[1:]


def light_modules() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(widehouse.__path__, "widehouse."):
        if is_spark_leaf(info.name) or info.name == "widehouse.__main__":
            continue
        names.append(info.name)
    return names


def test_spark_leaves_are_recognised() -> None:
    assert is_spark_leaf("widehouse.stream.spark.batch")
    assert is_spark_leaf("widehouse.source.spark")
    assert is_spark_leaf("widehouse.spark.session")
    assert not is_spark_leaf("widehouse.stream.transform")
    assert not is_spark_leaf("widehouse.source.controller")


def test_light_library_never_imports_pyspark() -> None:
    modules = light_modules()
    assert {"widehouse.settings", "widehouse.cli", "widehouse.source.controller"} <= set(modules)
    assert {"widehouse.stream.transform", "widehouse.clickhouse.ddl", "widehouse.demo"} <= set(modules)
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "bad = sorted(m for m in sys.modules if m == 'pyspark' or m.startswith('pyspark.'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"pyspark imported by the light library: {out.stdout}"


def test_the_source_package_exposes_its_spark_names_lazily() -> None:
    """``widehouse.source.register`` etc. resolve to the Spark adapters (imported only when asked)."""
    code = (
        "import widehouse.source as s\n"
        "from widehouse.source import spark as adapters\n"
        "assert s.register is adapters.register and s.PulsarDataSource is adapters.PulsarDataSource\n"
        "assert s.batch_metrics is adapters.batch_metrics\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_cli_imports_no_numpy_and_the_generator_package_gives_its_makers_when_asked() -> None:
    """Every ``widehouse`` command (a stream's, each Airflow task's job) imports the CLI; the traffic
    generator's makers import numpy (~0.07-0.09 s), which only ``widehouse generate`` needs."""
    code = (
        "import sys\n"
        "import widehouse.cli\n"
        "assert 'numpy' not in sys.modules, 'numpy'\n"
        "import widehouse.generator as g\n"
        "from widehouse.generator import core, run\n"
        "assert g.TrafficGenerator is core.TrafficGenerator and g.Chunk is core.Chunk\n"
        "assert g.generate is run.generate\n"
        "try:\n"
        "    g.no_such_name\n"
        "except AttributeError as e:\n"
        "    assert 'no_such_name' in str(e)\n"
        "else:\n"
        "    raise AssertionError('no AttributeError')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]

"""The driver's class-data-sharing archive with a real JVM and Spark.

``make setup`` trains the archive (``widehouse spark archive``); :func:`class_archive.build` trains it
here only if it is missing. Each check starts its own driver in a subprocess (a JVM's options are
fixed when it starts; this process may have one already).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from widehouse.settings import load_settings
from widehouse.spark import class_archive

pytestmark = pytest.mark.spark

_DRIVER = """
import sys
from widehouse.settings import load_settings
from widehouse.spark.session import build_session
spark = build_session(load_settings(), "class-archive-test", {
    "spark.sql.catalogImplementation": "in-memory", **dict(a.split("=", 1) for a in sys.argv[1:])})
print("options:", spark.sparkContext.getConf().get("spark.driver.extraJavaOptions", ""))
print("sum:", spark.range(10).groupBy().sum("id").collect()[0][0])
loader = spark.sparkContext._jvm.java.lang.Thread.currentThread().getContextClassLoader()
try:  # the provider of the ML functions every session registers, from spark-mllib's jar
    loader.loadClass("org.apache.spark.sql.ml.InternalFunctionRegistration")
    print("ml: on the class path")
except Exception:
    print("ml: left out")
"""


def _driver(*conf: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _DRIVER, *conf],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


@pytest.fixture(scope="module")
def archive() -> Path:
    path, _ = class_archive.build(load_settings())
    return path


def test_a_driver_starts_from_the_archive(archive: Path) -> None:
    options = class_archive.driver_java_options(load_settings())
    assert options is not None and str(archive) in options
    # -Xshare:on makes the JVM refuse to start unless it maps the archive: this driver ran from it
    done = _driver(f"spark.driver.extraJavaOptions={options} -Xshare:on")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "sum: 45" in done.stdout
    # and build_session adds the archive by itself (a driver's default options)
    plain = _driver()
    assert plain.returncode == 0, plain.stderr[-3000:]
    assert f"-XX:SharedArchiveFile={archive}" in plain.stdout
    assert "sum: 45" in plain.stdout
    # from the lean Spark home, which the archive was trained with (-Xshare:on above held to it)
    assert "ml: left out" in done.stdout and "ml: left out" in plain.stdout


def test_a_driver_runs_from_sparks_own_home_when_lean_homes_are_off(archive: Path) -> None:
    done = _driver(WIDEHOUSE_SPARK_LEAN_HOME_DIR="off")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "sum: 45" in done.stdout and "ml: on the class path" in done.stdout
    assert f"-XX:SharedArchiveFile={archive}" not in done.stdout  # trained for the lean class path


def test_a_refused_archive_does_not_stop_a_driver(archive: Path, tmp_path: Path) -> None:
    # another class path than the training's: the JVM refuses the archive and starts without it
    extra = tmp_path / "extra"
    extra.mkdir()
    done = _driver(f"spark.driver.extraClassPath={extra}")
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"-XX:SharedArchiveFile={archive}" in done.stdout
    assert "sum: 45" in done.stdout
    assert "Unable to use shared archive" not in done.stdout + done.stderr  # and says nothing of it

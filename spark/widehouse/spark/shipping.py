"""What a job ships to a cluster's executors: the ``widehouse`` wheel and a packed environment.

On ``local[*]`` the executors are threads of the driver's JVM and run the driver's interpreter. On
a cluster nothing on an executor may come from the driver's disk, so ``widehouse spark package``
builds two artefacts (:func:`package`):

- ``widehouse-<version>-py3-none-any.whl`` (``pip wheel --no-deps``): pure Python, for
  ``spark.submit.pyFiles`` (``WIDEHOUSE_SPARK_PY_FILES``) over a cluster Python that already has the
  pinned dependencies (what the compose image installs; ``WIDEHOUSE_SPARK_PYTHON`` names it);
- ``widehouse-env.tar.gz``: a small virtualenv holding only what executor-side code imports
  (:data:`EXECUTOR_REQUIREMENTS`, pinned by ``constraints.txt``) plus the wheel, for
  ``spark.archives`` (``WIDEHOUSE_SPARK_ARCHIVE``); each executor unpacks it as ``./env`` and runs
  ``./env/bin/python``. Like ``venv-pack``'s archives it links to the base interpreter it was built
  with (``pyvenv.cfg``'s ``home``), so every node needs that same Python at the same path (true on
  one box and in a uniform image); otherwise use the wheel over the nodes' own Python.

:mod:`widehouse.spark.session` attaches them when the master is not local.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from widehouse.errors import SetupError

EXECUTOR_REQUIREMENTS: tuple[str, ...] = (
    "pyarrow",
    "numpy",
    "pulsar-client",
    "orjson",
    "msgspec",
    "happybase",
    "thriftpy2",
    "PyYAML",
    "requests",
)
"""What code that runs on executors imports: the Pulsar source's readers (pulsar-client, pyarrow,
orjson; requests for the clients' credentials probe against the admin API), the stream transform in
``mapInArrow`` (pyarrow; orjson and msgspec parse the payloads), the HBase partition tasks (happybase
over thriftpy2; numpy packs the day rows' cells), and the catalog's modules its pickled objects bring
along (PyYAML). pyspark itself comes from the worker's Spark (``python/lib/pyspark.zip``).
tests/cluster runs every executor path (the daily merge's HBase tasks included) against the
archive."""

ENV_NAME = "env"
"""The directory an executor unpacks the archive into (``spark.archives <archive>#env``)."""
ENV_PYTHON = f"./{ENV_NAME}/bin/python"

_LEFT_OUT = (
    "pip",
    "setuptools",
    "pkg_resources",
    "_distutils_hack",
    "distutils-precedence.pth",
    "pyarrow/include",
    "pyarrow/tests",
)
"""Parts of the environment no executor imports (site-packages relative)."""


@dataclass(frozen=True)
class Artefacts:
    wheel: Path
    archive: Path | None
    archive_bytes: int


def build_wheel(source: Path, out_dir: Path) -> Path:
    """``pip wheel --no-deps`` of the project at ``source`` into ``out_dir``; returns the wheel."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="widehouse-wheel-") as tmp:
        # a copy of what the wheel is built from: setuptools writes build/ into its source dir
        tree = Path(tmp) / "src"
        shutil.copytree(source / "spark" / "widehouse", tree / "spark" / "widehouse",
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))  # fmt: skip
        for name in ("pyproject.toml", "README.md"):
            shutil.copy2(source / name, tree / name)
        wheels = Path(tmp) / "wheels"
        _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
              str(wheels), str(tree)], "building the widehouse wheel")  # fmt: skip
        built = sorted(wheels.glob("widehouse-*.whl"))
        if len(built) != 1:
            raise SetupError(
                f"pip wheel of {source} built {[p.name for p in built]}, not one widehouse wheel"
            )
        target = out_dir / built[0].name
        shutil.move(str(built[0]), target)
    return target


def build_env(wheel: Path, constraints: Path, archive: Path, base_python: str | None = None) -> int:
    """A virtualenv of :data:`EXECUTOR_REQUIREMENTS` (pinned by ``constraints``) and ``wheel``, packed
    as the ``.tar.gz`` ``archive`` (its root is the environment). Returns the archive's size."""
    if not constraints.is_file():
        raise SetupError(f"constraints file {constraints} not found (the executor environment is pinned)")
    python = base_python or str(getattr(sys, "_base_executable", None) or sys.executable)
    with tempfile.TemporaryDirectory(prefix="widehouse-env-") as tmp:
        env = Path(tmp) / ENV_NAME
        _run([python, "-m", "venv", str(env)], "creating the executor virtualenv")
        pip = [str(env / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        _run([*pip, "-c", str(constraints), *EXECUTOR_REQUIREMENTS], "installing the executor requirements")
        _run([*pip, "--no-deps", str(wheel)], "installing the widehouse wheel into the executor env")
        if not any((env / "lib").glob("python3.*/site-packages/widehouse/__init__.py")):
            raise SetupError(f"the executor environment built from {wheel} has no widehouse package")
        site = next((env / "lib").glob("python3.*")) / "site-packages"
        for part in _LEFT_OUT:
            for path in [site / part, *site.glob(f"{part}-*.dist-info")]:
                if path.is_dir():
                    shutil.rmtree(path)
                elif path.is_file():
                    path.unlink()
        archive.parent.mkdir(parents=True, exist_ok=True)
        partial = archive.with_name(archive.name + ".partial")
        # level 1: a few MB larger than 9, several times faster to build; unpacking costs the same
        with tarfile.open(partial, "w:gz", compresslevel=1) as tar:
            for child in sorted(env.iterdir()):
                tar.add(child, arcname=child.name)
        partial.replace(archive)
    return archive.stat().st_size


def package(source: Path, out_dir: Path, constraints: Path, with_env: bool = True) -> Artefacts:
    """Build the wheel and (``with_env``) the packed executor environment into ``out_dir``."""
    wheel = build_wheel(source, out_dir)
    if not with_env:
        return Artefacts(wheel, None, 0)
    archive = out_dir / "widehouse-env.tar.gz"
    size = build_env(wheel, constraints, archive)
    return Artefacts(wheel, archive, size)


_SCRUBBED = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PIP_TARGET", "PIP_PREFIX", "PIP_USER")
"""Variables that would make pip see (and skip) this checkout's packages, or install elsewhere."""


def _run(argv: list[str], what: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
    try:
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1800, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SetupError(f"{what} failed: {exc}") from exc
    if done.returncode != 0:
        raise SetupError(f"{what} failed ({done.returncode}): {(done.stderr or done.stdout)[-2000:]}")

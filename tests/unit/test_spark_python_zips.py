"""Spark's Python zips with bytecode: imported without compiling, never shadowing a changed source."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.support import run_cli
from widehouse.errors import SetupError
from widehouse.spark import python_zips
from widehouse.spark.class_archive import spark_home
from widehouse.spark.python_zips import MARKER, compile_zip, is_compiled

SOURCES = {
    "pkg/__init__.py": b"NAME = 'pkg'\n",
    "pkg/mod.py": b"VALUE = 41 + 1\n\ndef fail():\n    raise RuntimeError('from mod')\n",
    "pkg/data.txt": b"not python",
}

REFUSE_COMPILING = """
import zipimport
def refuse(pathname, source):
    raise AssertionError(f"compiled {pathname}")
zipimport._compile_source = refuse
"""
"""Makes zipimport fail on any source it would compile: only bytecode in a zip can be imported."""

IMPORT_PKG = """
import sys
sys.path.insert(0, sys.argv[1])
import pkg.mod
print(pkg.mod.VALUE, pkg.mod.__file__.rsplit("/", 1)[-1])
"""
"""Imports from the zip given in a fresh interpreter; prints what the module holds and where it
came from."""


def _zip(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(zipfile.ZipInfo("pkg/"), b"")
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def _members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as archive:
        return {info.filename: archive.read(info) for info in archive.infolist()}


def _import(path: Path, mode: str = "refuse") -> subprocess.CompletedProcess[str]:
    """IMPORT_PKG from ``path``; with ``mode`` "refuse", from bytecode only (REFUSE_COMPILING)."""
    script = (REFUSE_COMPILING if mode == "refuse" else "") + IMPORT_PKG
    command = [sys.executable, "-c", script, str(path)]
    return subprocess.run(command, capture_output=True, text=True, check=False)


def test_a_compiled_zip_imports_without_compiling_and_keeps_its_entries(tmp_path: Path) -> None:
    path = _zip(tmp_path / "pyspark.zip", SOURCES)
    assert _import(path).returncode != 0  # plain zip: zipimport must compile the sources
    before = _members(path)
    assert compile_zip(path) == 2
    after = _members(path)
    assert {k: v for k, v in after.items() if k in before} == before  # every entry as it was
    assert set(after) - set(before) == {"pkg/__init__.pyc", "pkg/mod.pyc", MARKER}
    done = _import(path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["42", "mod.pyc"]
    assert is_compiled(path)


def test_tracebacks_still_show_the_source_lines(tmp_path: Path) -> None:
    path = _zip(tmp_path / "pyspark.zip", SOURCES)
    compile_zip(path)
    # as a Spark worker reports a task's error: traceback.format_exc, source lines from the loader
    probe = (
        f"import sys, traceback; sys.path.insert(0, {str(path)!r}); import pkg.mod\n"
        "try:\n    pkg.mod.fail()\nexcept RuntimeError:\n    print(traceback.format_exc())\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False)
    assert f'File "{path}/pkg/mod.py", line 4, in fail' in done.stdout
    assert "raise RuntimeError('from mod')" in done.stdout


def test_compiling_again_leaves_a_compiled_zip_alone(tmp_path: Path) -> None:
    path = _zip(tmp_path / "pyspark.zip", SOURCES)
    compile_zip(path)
    stamp = path.stat().st_mtime_ns, path.stat().st_ino
    assert compile_zip(path) == 0
    assert (path.stat().st_mtime_ns, path.stat().st_ino) == stamp


def test_bytecode_that_no_longer_matches_its_source_is_not_used(tmp_path: Path) -> None:
    path = _zip(tmp_path / "pyspark.zip", SOURCES)
    compile_zip(path)
    members = _members(path)
    members["pkg/mod.py"] = b"VALUE = 7\n"  # the source changed, its .pyc did not
    del members["pkg/"]
    _zip(path, members)
    done = _import(path, mode="allow")
    assert done.stdout.split() == ["7", "mod.py"], done.stderr


def test_another_pythons_bytecode_falls_back_to_the_source_and_is_compiled_again(tmp_path: Path) -> None:
    path = _zip(tmp_path / "pyspark.zip", SOURCES)
    compile_zip(path)
    members = _members(path)
    for name in ("pkg/__init__.pyc", "pkg/mod.pyc"):
        members[name] = b"\x00\x00\r\n" + members[name][4:]  # another interpreter's magic number
    members[MARKER] = b"00000d0a\n"
    del members["pkg/"]
    _zip(path, members)
    assert not is_compiled(path)
    assert _import(path, mode="allow").stdout.split() == ["42", "mod.py"]  # the source, as without bytecode
    assert compile_zip(path) == 2
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
    assert len(names) == len(set(names))  # the foreign .pyc files were replaced, not added twice
    assert _import(path).stdout.split() == ["42", "mod.pyc"]


def test_a_source_that_does_not_compile_gets_no_bytecode(tmp_path: Path) -> None:
    path = _zip(tmp_path / "pyspark.zip", {**SOURCES, "pkg/broken.py": b"def (:\n"})
    assert compile_zip(path) == 2
    assert "pkg/broken.pyc" not in _members(path)


def test_bytecode_shipped_without_its_source_is_kept(tmp_path: Path) -> None:
    lone = b"\x00\x00\r\nsourceless module"
    path = _zip(tmp_path / "pyspark.zip", {**SOURCES, "pkg/only.pyc": lone})
    assert compile_zip(path) == 2
    assert _members(path)["pkg/only.pyc"] == lone


def test_a_file_that_is_not_a_zip_is_a_setup_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "pyspark.zip"
    path.write_bytes(b"not a zip")
    with pytest.raises(SetupError, match=f"cannot add bytecode to {path}"):
        compile_zip(path)
    assert path.read_bytes() == b"not a zip"
    assert os.listdir(tmp_path) == ["pyspark.zip"]  # no temporary file left behind


def test_the_installed_sparks_zips_hold_this_pythons_bytecode() -> None:
    """`make setup` compiles them (``widehouse spark archive``): a source runner's imports compile
    nothing from pyspark's zip."""
    home = spark_home()
    assert home is not None
    zips = python_zips.spark_python_zips(home)
    assert [p.name for p in zips if p.name.startswith("pyspark")] == ["pyspark.zip"]
    assert all(is_compiled(p) for p in zips), "run `widehouse spark archive` (make setup does)"
    probe = REFUSE_COMPILING + (
        "import pyspark.sql.streaming.python_streaming_source_runner, pyspark.daemon, pyspark.worker\n"
        "import pyspark; print(pyspark.__file__)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(p) for p in zips)}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("pyspark.zip/pyspark/__init__.pyc")


def _spark_home(root: Path, zip_bytes: bytes | None = None) -> Path:
    """A stand-in Spark home whose ``python/lib`` holds one zip (``zip_bytes``, else a real one)."""
    lib = root / "spark" / "python" / "lib"
    lib.mkdir(parents=True)
    if zip_bytes is None:
        _zip(lib / "pyspark.zip", SOURCES)
    else:
        (lib / "pyspark.zip").write_bytes(zip_bytes)
    return root / "spark"


def _archive_cli(home: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {
        "SPARK_HOME": str(home),
        "WIDEHOUSE_STATE_DIR": str(tmp_path / "state"),
        "WIDEHOUSE_SPARK_CLASS_ARCHIVE_DIR": "off",
    }
    return run_cli("spark", "archive", env=env)


def test_the_archive_command_compiles_the_zips_and_says_so(tmp_path: Path) -> None:
    home = _spark_home(tmp_path)
    first = _archive_cli(home, tmp_path)
    assert first.returncode == 0, first.stderr
    assert f"bytecode of pyspark.zip: 2 modules compiled ({home}/python/lib/pyspark.zip)" in first.stdout
    assert is_compiled(home / "python" / "lib" / "pyspark.zip")
    again = _archive_cli(home, tmp_path)
    assert "bytecode of pyspark.zip: up to date" in again.stdout


def test_a_zip_that_cannot_be_compiled_fails_the_command_naming_it_and_the_archive_still_runs(
    tmp_path: Path,
) -> None:
    home = _spark_home(tmp_path, b"not a zip")
    done = _archive_cli(home, tmp_path)
    assert done.returncode == 1
    assert f"cannot add bytecode to {home}/python/lib/pyspark.zip" in done.stderr
    assert "class archives are off" in done.stdout  # the next step still ran

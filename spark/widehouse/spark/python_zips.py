"""Spark's own Python zips with their bytecode in them: every Python process Spark starts imports
pyspark without compiling it.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` (and py4j's zip) first on the ``PYTHONPATH`` of
every Python process it starts: the Python data source's planners (``lookup_data_sources``,
``create_data_source``, ``plan_data_source_read``), each streaming query's source runner and the
daemons that fork the task workers. Python imports from a zip with ``zipimport``, which cannot write
a bytecode cache: with only ``.py`` files in the zip, each of those processes compiles the pyspark
modules it imports, every time. On this project's 2-core box that is ~0.8 core-s per process against
~0.35 s from compiled files (NOTES, issue 28 fifth round), and a stream app starts six such
processes before its first batch, two more for each query it starts again.

:func:`compile_zips` adds a ``.pyc`` beside every ``.py`` of those zips (``zipimport`` looks for
``name.pyc`` before ``name.py``). The bytecode is hash-checked (PEP 552): a source that no longer
matches its ``.pyc`` is compiled as before, and a Python of another version (an executor's on a
cluster) finds a foreign magic number and also falls back to the source. The zip's own entries are
kept as they were; the new zip replaces the old one atomically. ``widehouse spark archive`` (run by
``make setup``) calls it for the installed Spark; a Spark reinstalled by pip comes with plain zips
again, which the next ``make setup`` compiles.
"""

from __future__ import annotations

import importlib.util
import marshal
import os
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path

from widehouse.errors import SetupError
from widehouse.spark.class_archive import spark_home

MARKER = "widehouse-bytecode.txt"
"""A member naming the Python bytecode version the zip's ``.pyc`` files are for."""


def _magic() -> str:
    return importlib.util.MAGIC_NUMBER.hex()


def spark_python_zips(home: Path) -> list[Path]:
    """The zips Spark puts on its Python processes' path: ``<home>/python/lib/*.zip``."""
    return sorted((home / "python" / "lib").glob("*.zip"))


def is_compiled(path: Path) -> bool:
    """Whether ``path`` holds bytecode for this Python (written by :func:`compile_zip`)."""
    try:
        with zipfile.ZipFile(path) as archive:
            return MARKER in archive.namelist() and archive.read(MARKER).decode().strip() == _magic()
    except (OSError, zipfile.BadZipFile):
        return False


def _replaced(name: str, names: set[str]) -> bool:
    """A member :func:`compile_zip` writes anew: the marker, and bytecode beside its source (a
    ``.pyc`` without a ``.py`` is a module of its own and is kept)."""
    return name == MARKER or (name.endswith(".pyc") and name[:-1] in names)


def _bytecode(source: bytes, filename: str) -> bytes:
    """A hash-checked ``.pyc`` of ``source`` (PEP 552: magic, flags "hash-based, checked", the
    source's hash, the marshalled code), compiled as ``zipimport`` would have compiled it."""
    code = compile(source, filename, "exec", dont_inherit=True)
    flags = (0b11).to_bytes(4, "little")
    return importlib.util.MAGIC_NUMBER + flags + importlib.util.source_hash(source) + marshal.dumps(code)


def compile_zip(path: Path) -> int:
    """Add this Python's bytecode to the zip at ``path`` unless it has it; returns the modules
    compiled (0 when it was up to date). A source that does not compile keeps no ``.pyc`` (Python
    reports it at import, as before). Raises :class:`SetupError` when the zip cannot be rewritten."""
    if is_compiled(path):
        return 0
    compiled = 0
    try:
        with zipfile.ZipFile(path) as source:
            # bytecode of another Python (and its marker) is replaced, not kept beside the new one
            names = set(source.namelist())
            members = [m for m in source.infolist() if not _replaced(m.filename, names)]
            handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            os.close(handle)
            try:
                with zipfile.ZipFile(temporary, "w") as target:
                    for member in members:
                        data = source.read(member)
                        target.writestr(member, data)
                        if not member.filename.endswith(".py"):
                            continue
                        try:
                            # the name zipimport gives a module it compiles from this zip
                            pyc = _bytecode(data, f"{path}{os.sep}{member.filename}")
                        except (SyntaxError, ValueError):
                            continue
                        info = zipfile.ZipInfo(member.filename[:-3] + ".pyc", member.date_time)
                        info.external_attr = member.external_attr
                        target.writestr(info, pyc, zipfile.ZIP_STORED)
                        compiled += 1
                    target.writestr(zipfile.ZipInfo(MARKER, (2020, 1, 1, 0, 0, 0)), _magic() + "\n")
                os.chmod(temporary, path.stat().st_mode & 0o777)
                os.replace(temporary, path)  # readers that opened the old zip keep reading it
            except BaseException:
                Path(temporary).unlink(missing_ok=True)
                raise
    except (OSError, zipfile.BadZipFile) as exc:
        raise SetupError(f"cannot add bytecode to {path}: {exc}") from exc
    return compiled


def compile_zips(environ: Mapping[str, str] | None = None) -> list[tuple[Path, int]]:
    """:func:`compile_zip` for the installed Spark's Python zips (``$SPARK_HOME``, else pyspark's);
    returns (zip, modules compiled) for each."""
    home = spark_home(environ)
    if home is None:
        raise SetupError("no Spark found (SPARK_HOME or an installed pyspark): no Python zips to compile")
    return [(path, compile_zip(path)) for path in spark_python_zips(home)]

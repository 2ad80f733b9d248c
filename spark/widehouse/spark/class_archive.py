"""A class-data-sharing (CDS) archive of Spark's classes for the driver JVM: seconds off start-up.

A cold Spark driver spends most of its first seconds loading and verifying some 14,000 classes
(Spark SQL, Delta, Hadoop, the Python data source machinery). Java 13+ can write the classes an
application loaded to an archive at exit (``-XX:ArchiveClassesAtExit``) and map that archive at
the next start (``-XX:SharedArchiveFile``). On this project's 2-core box it takes a stream app's
``SparkSession`` from ~4.9 s to ~3.1 s and its first job from ~1.7 s to ~0.9 s (NOTES, issue 28
fourth round).

- :func:`build` trains one: a subprocess runs :mod:`widehouse.spark.class_archive_training` (what
  the jobs do, at toy size, no services) in a JVM that writes the archive as it exits, then moves it
  into place atomically. ``widehouse spark archive`` runs it; ``make setup`` calls that.
- :func:`driver_java_options` is what :func:`widehouse.spark.session.build_session` adds to
  ``spark.driver.extraJavaOptions`` when an archive for this JDK and this Spark exists.

An archive is only valid for the JVM build and the class path it was written with, so its file name
carries a key of both (:func:`archive_key`); the class path is the lean Spark home's the driver runs
from (:mod:`widehouse.spark.lean_home`), where one applies. A JDK update or another pyspark finds no
archive and starts as before until ``widehouse spark archive`` runs again. Should the JVM still refuse one (a
class path changed by ``spark.driver.extraClassPath``), it starts without it, silently: the options
turn the CDS log off, so nothing but the start-up time changes. Executors on a cluster are not given
the archive (their class path is the cluster's); on ``local[*]`` they run in the driver JVM.
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from widehouse.errors import SetupError
from widehouse.private import others_could_change, private_dir
from widehouse.services.base import find_java
from widehouse.services.spark_cluster import spark_home as installed_spark_home
from widehouse.settings import Settings
from widehouse.spark.lean_home import driver_environ, jars_fingerprint

log = logging.getLogger("widehouse.spark")

QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
"""JVM options that keep the CDS log (and a refused archive's warning) off the job's output."""

DRIVER_OPTIONS = "spark.driver.extraJavaOptions"
TRAINING_TIMEOUT_S = 300.0


def java_binary(environ: Mapping[str, str] | None = None) -> Path | None:
    """The ``java`` Spark's launcher runs: ``$JAVA_HOME/bin/java``, else the one on PATH (resolved)."""
    env = os.environ if environ is None else environ
    found = find_java(env.get("JAVA_HOME"), env.get("PATH"))
    return Path(found).resolve() if found else None


def spark_home(environ: Mapping[str, str] | None = None) -> Path | None:
    """Where Spark's jars are: ``$SPARK_HOME``, else the installed pyspark (as pyspark finds it)."""
    env = os.environ if environ is None else environ
    if env.get("SPARK_HOME"):
        return Path(env["SPARK_HOME"])
    try:
        return installed_spark_home()
    except SetupError:  # no pyspark here: no archive, the driver (if any) starts as before
        return None


def archive_key(java: Path, home: Path) -> str:
    """A digest of what makes an archive valid: the JVM build and Spark's class path.

    The JVM by its resolved path and its ``libjvm.so`` (size and modification time: a package update
    replaces it); the class path by the names and sizes of Spark's jars.
    """
    digest = hashlib.sha256(str(java).encode())
    for lib in sorted(java.parent.parent.glob("lib/server/libjvm.*")):
        stat = lib.stat()
        digest.update(f"{lib.name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    digest.update(jars_fingerprint(home).encode())
    return digest.hexdigest()[:16]


def archive_path(settings: Settings, environ: Mapping[str, str] | None = None) -> Path | None:
    """This JDK's and this Spark's archive file (it may not exist yet); None when archives are off
    or no ``java`` or Spark is found. The Spark is the one the driver runs from: the lean home
    (:mod:`widehouse.spark.lean_home`) when one applies, whose class path the archive must match."""
    directory = settings.spark.class_archive_dir
    env = driver_environ(settings, environ)
    java = java_binary(env)
    home = spark_home(env)
    if directory is None or java is None or home is None:
        return None
    return Path(directory) / f"spark-driver-{archive_key(java, home)}.jsa"


def driver_java_options(settings: Settings, environ: Mapping[str, str] | None = None) -> str | None:
    """The driver JVM's options that map the archive, when it exists; else None.

    The JVM runs the classes an archive holds, so one another user could have written or swapped
    (:func:`widehouse.private.others_could_change`) is not mapped."""
    path = archive_path(settings, environ)
    if path is None or not path.is_file():
        return None
    refusal = others_could_change(path)
    if refusal is not None:
        log.warning("the class archive %s is not used (%s): the driver starts without it", path, refusal)
        return None
    return f"-XX:SharedArchiveFile={path} {QUIET}"


OWN_CLASS_SHARING = ("SharedArchiveFile", "-Xshare", "ArchiveClassesAtExit")
"""Fragments of JVM options by which a user's own Java options already choose class sharing."""


def with_driver_options(
    conf: Mapping[str, str], options: str | None, unless: tuple[str, ...] = OWN_CLASS_SHARING
) -> dict[str, str]:
    """``conf`` with ``options`` appended to the driver's Java options, unless the conf's already
    hold one of the fragments ``unless`` (the user's own choice wins; by default: class sharing,
    ``-XX:SharedArchiveFile``, ``-Xshare``, ``-XX:ArchiveClassesAtExit``)."""
    merged = dict(conf)
    if not options:
        return merged
    current = merged.get(DRIVER_OPTIONS, "")
    if any(flag in current for flag in unless):
        return merged
    merged[DRIVER_OPTIONS] = f"{current} {options}".strip()
    return merged


def build(settings: Settings, *, force: bool = False) -> tuple[Path, bool]:
    """Train this JDK's and Spark's archive unless it exists (or ``force``); returns (path, built).

    Archives of other keys in the directory (an older JDK or Spark) are removed once the new one is
    in place. Raises :class:`SetupError` when archives are off or the training fails (with the tail
    of its output).
    """
    path = archive_path(settings)
    if path is None:
        raise SetupError(
            "no class archive to build: WIDEHOUSE_SPARK_CLASS_ARCHIVE_DIR is off, or no java (JAVA_HOME "
            "or PATH) or pyspark was found"
        )
    if path.is_file() and not force:
        return path, False
    private_dir(path.parent)
    remove_abandoned(path.parent)
    partial = path.with_name(f"{path.stem}.{os.getpid()}.partial")
    partial.unlink(missing_ok=True)
    # the training's own session must not map an archive while it writes one
    env = {**os.environ, "WIDEHOUSE_SPARK_CLASS_ARCHIVE_DIR": "off"}
    command = [sys.executable, "-m", "widehouse.spark.class_archive_training", str(partial)]
    try:
        done = subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=TRAINING_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired as exc:
        partial.unlink(missing_ok=True)
        raise SetupError(f"training the class archive took over {TRAINING_TIMEOUT_S:.0f} s") from exc
    if done.returncode != 0 or not partial.is_file() or partial.stat().st_size == 0:
        partial.unlink(missing_ok=True)
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise SetupError(
            f"training the class archive failed (exit {done.returncode}, no archive at {partial}):\n{tail}"
        )
    os.replace(partial, path)
    for other in path.parent.glob("spark-driver-*.jsa"):
        if other != path:
            other.unlink(missing_ok=True)
    return path, True


def remove_abandoned(directory: Path, now: float | None = None) -> list[Path]:
    """Remove archives a training left unfinished (``*.partial``) older than a training may take.

    An interrupted ``widehouse spark archive`` kills its training process, but that process's JVM
    still writes its archive (~200 MB) as it exits, to a ``.partial`` nobody moves into place.
    Younger ones may belong to a training still running. Returns the files removed.
    """
    cutoff = (time.time() if now is None else now) - TRAINING_TIMEOUT_S
    removed = []
    for stale in sorted(directory.glob("spark-driver-*.partial")):
        try:
            if stale.stat().st_mtime < cutoff:
                stale.unlink()
                removed.append(stale)
        except FileNotFoundError:  # another training removed or moved it meanwhile
            continue
    return removed

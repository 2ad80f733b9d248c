"""A Spark home for the driver without Spark's ML library: ~0.3-0.5 s off every session's start.

Every ``SparkSession`` loads the session extensions that jars on its class path register through
``META-INF/services/org.apache.spark.sql.SparkSessionExtensionsProvider``. Spark 4's ML jar
(``spark-mllib_*.jar``) registers one, ``org.apache.spark.sql.ml.InternalFunctionRegistration``,
which builds Scala reflection's runtime universe and a dozen UDFs with their encoders in every new
session: 0.40 s of the 0.47 s the JVM's ``SparkSession`` took to build on this project's 2-core box
(async-profiler, NOTES issue 28), on the start-up's path. No Widehouse job calls an ML function, and
the provider cannot be skipped otherwise: Spark loads every one its class loader finds.

So the driver runs from a *lean home*: a directory of symbolic links to the Spark home's entries
(``bin/``, ``python/``, ``conf/``, ...), whose ``jars/`` links every jar but those
:data:`LEFT_OUT`. :func:`driver_environ` is the environment with ``SPARK_HOME`` pointing there,
which :func:`widehouse.spark.session.build_session` starts the driver JVM with and which the class
archive (:mod:`widehouse.spark.class_archive`) is trained and keyed with, so the archive matches the
lean class path. Nothing of Spark is copied or changed.

- A lean home is made once per Spark build (its name carries a digest of the source's path and
  jars), atomically, in ``WIDEHOUSE_SPARK_LEAN_HOME_DIR`` (default ``<vendor>/spark-lean``; ``off``:
  the driver runs from Spark's home as it is). The JVM runs the jars it links, so the directory is
  created 0700 and a lean home another user could change is never used.
- A ``SPARK_HOME`` of the user's own is used as it is (their Spark, their jars).
- Executors on a cluster run from the cluster's Spark; on ``local[*]`` they share the driver's JVM,
  so a job that wants ML functions there sets ``WIDEHOUSE_SPARK_LEAN_HOME_DIR=off``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from widehouse.errors import ConfigError, SetupError
from widehouse.private import others_could_change, private_dir
from widehouse.services.spark_cluster import spark_home as installed_spark_home
from widehouse.settings import Settings
from widehouse.spark.environ import environ_set

log = logging.getLogger("widehouse.spark")

LEFT_OUT = ("spark-mllib_",)
"""Name prefixes of the jars a lean home leaves out: the one that registers ML functions in every
session (``spark-mllib-local`` and ``spark-graphx`` register nothing and stay)."""


def left_out(name: str) -> bool:
    """Whether a jar of this name stays out of a lean home."""
    return name.startswith(LEFT_OUT)


def jars_fingerprint(home: Path) -> str:
    """The names and sizes of a Spark home's jars, in order: what tells one Spark build's class path
    from another's (a lean home's name here, the class archive's key in
    :func:`widehouse.spark.class_archive.archive_key`)."""
    return "".join(f"{jar.name}:{jar.stat().st_size}" for jar in sorted((home / "jars").glob("*.jar")))


def lean_name(source: Path) -> str:
    """The directory name of ``source``'s lean home: a digest of its path and its jars, so another
    Spark build, or another install of it, gets a lean home of its own."""
    digest = hashlib.sha256(f"{source}{jars_fingerprint(source)}".encode())
    return f"spark-{digest.hexdigest()[:16]}"


def make_lean_home(source: Path, directory: Path) -> Path | None:
    """``source``'s lean home under ``directory``, made now if it is not there yet; None when
    ``source`` has no jar to leave out (the driver runs from ``source`` as it is).

    Made as a partial directory and renamed into place, so concurrent drivers starting see a whole
    lean home or none (the one that loses the race drops its own). Raises :class:`ConfigError` when
    ``directory`` or the lean home is one another user could change."""
    jars = sorted((source / "jars").iterdir())
    if not any(left_out(jar.name) for jar in jars):
        return None
    private_dir(directory)
    target = directory / lean_name(source)
    if not target.is_dir():
        partial = directory / f".{target.name}.{os.getpid()}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(mode=0o700)
        for entry in sorted(source.iterdir()):
            if entry.name != "jars":
                (partial / entry.name).symlink_to(entry)
        (partial / "jars").mkdir(mode=0o700)
        for jar in jars:
            if not left_out(jar.name):
                (partial / "jars" / jar.name).symlink_to(jar)
        try:
            partial.rename(target)
        except OSError:  # another driver's start put it in place first
            shutil.rmtree(partial, ignore_errors=True)
    refusal = others_could_change(target)
    if refusal is not None:
        raise ConfigError(f"the lean Spark home {target} is not used: {refusal}")
    return target


def lean_home(settings: Settings, environ: Mapping[str, str] | None = None) -> Path | None:
    """The lean home the driver runs from, made if needed; None: it runs from Spark's home as it is
    (lean homes off, a ``SPARK_HOME`` of the user's own, no pyspark, nothing to leave out, or a lean
    home that cannot be made or trusted, which is logged)."""
    env = os.environ if environ is None else environ
    directory = settings.spark.lean_home_dir
    if directory is None or env.get("SPARK_HOME"):
        return None
    try:
        return make_lean_home(installed_spark_home(), Path(directory))
    except SetupError:  # no pyspark here: nothing starts a driver anyway
        return None
    except (OSError, ConfigError) as exc:
        log.warning("the driver runs from Spark's own home, with its ML jar (%s)", exc)
        return None


def driver_environ(settings: Settings, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environ`` (default: this process's) as the driver JVM gets it: with ``SPARK_HOME`` set to
    the lean home, when one applies (:func:`lean_home`)."""
    env = dict(os.environ if environ is None else environ)
    home = lean_home(settings, env)
    if home is not None:
        env["SPARK_HOME"] = str(home)
    return env


@contextmanager
def spark_home_of(environ: Mapping[str, str]) -> Iterator[None]:
    """Inside it, this process's ``SPARK_HOME`` is ``environ``'s, as pyspark reads it when it starts
    the driver JVM (``$SPARK_HOME/bin/spark-submit``, with this process's environment); restored after."""
    wanted = environ.get("SPARK_HOME")
    with environ_set({} if wanted is None else {"SPARK_HOME": wanted}):
        yield

"""The driver JVM started without spark-submit's launcher JVM: ~0.3 s off every session's start.

pyspark starts its driver as ``$SPARK_HOME/bin/spark-submit --conf k=v ... pyspark-shell``. Those
scripts (``spark-submit`` -> ``spark-class`` -> ``load-spark-env.sh``) first run a JVM of their own,
``org.apache.spark.launcher.Main``, whose only job is to print the driver's ``java`` command (class
path, ``-Xmx``, the driver's Java options, the JVM's module options), and then ``exec`` that
command. On this project's 2-core box the launcher costs ~0.3 s of wall time and ~0.35 core-s in
every process that starts Spark: the stream app, each Airflow task's job, each test's driver.

The launcher's answer is a pure function of a few inputs, so it is kept as a **launch plan** and
reused:

- The plan's key (:func:`plan_key`) digests what the launcher reads:
  - the arguments, without the ``--conf`` settings it never reads (:data:`LAUNCHER_CONFS` lists
    those it does: the constants of Spark 4's ``spark-launcher`` jar, such as the driver's memory,
    class path, library path and Java options, the master and the deploy mode);
  - the environment variables it or the scripts read (``SPARK_*``, ``PYSPARK_*``, ``HADOOP_*``,
    ``YARN_*``, ``JAVA_HOME``, the library paths, the JVM's own option variables);
  - ``spark-defaults.conf`` and ``java-opts`` in Spark's conf dir;
  - the JDK and Spark's jars (:func:`widehouse.spark.class_archive.archive_key`).
- A plan keeps the command up to ``org.apache.spark.deploy.SparkSubmit`` (the head). The rest is
  each launch's own arguments, which the launcher only echoes. A plan is kept only when the
  launcher's echo is exactly a reordering of the arguments, so nothing it would add is dropped.

The first start with a new key runs the launcher directly (without the scripts) and keeps its
plan; later starts run the driver JVM at once. The JVM gets the scripts' own exports as they would
set them (``SPARK_HOME``, ``SPARK_ENV_LOADED``, ``SPARK_CONF_DIR``, ``SPARK_SCALA_VERSION``,
``PYTHONHASHSEED=0``). Where the scripts would do more than that, the driver starts through
spark-submit as before: a ``spark-env.sh`` to source, ``SPARK_TESTING``, ``SPARK_SQL_TESTING`` or
``SPARK_PREPEND_CLASSES`` set, a ``--properties-file`` argument, a platform other than POSIX, or a
launcher that fails (spark-submit then reports its error).

Plans live in ``WIDEHOUSE_SPARK_LAUNCH_PLANS_DIR`` (default ``<vendor>/spark-launch``, beside the
class archive; ``off``: every driver starts through spark-submit). A plan is a command that is run,
so it is written 0600 into a directory created 0700, and only a plan no other user could have
written or swapped is used (:func:`widehouse.private.others_could_change`); in a directory others
could write to, each start asks the launcher and keeps nothing.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shlex
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from widehouse.errors import ConfigError
from widehouse.private import PRIVATE_FILE_MODE, others_could_change, private_dir
from widehouse.spark.class_archive import archive_key, java_binary, spark_home

log = logging.getLogger("widehouse.spark")

FORMAT = 1
"""The plans' file format; part of every key, so a new format never reads an old plan."""

SUBMIT_CLASS = "org.apache.spark.deploy.SparkSubmit"
LAUNCHER_CLASS = "org.apache.spark.launcher.Main"
LAUNCHER_TIMEOUT_S = 120.0
PLANS_KEPT = 32
"""Plans a directory keeps (the newest): one per JDK, Spark build and driver options in use."""

LAUNCHER_CONFS = frozenset(
    {
        "spark.api.mode",
        "spark.driver.defaultExtraClassPath",
        "spark.driver.defaultJavaOptions",
        "spark.driver.extraClassPath",
        "spark.driver.extraJavaOptions",
        "spark.driver.extraLibraryPath",
        "spark.driver.memory",
        "spark.executor.cores",
        "spark.executor.defaultExtraClassPath",
        "spark.executor.defaultJavaOptions",
        "spark.executor.extraClassPath",
        "spark.executor.extraJavaOptions",
        "spark.executor.extraLibraryPath",
        "spark.executor.memory",
        "spark.master",
        "spark.pyspark.driver.python",
        "spark.pyspark.python",
        "spark.r.shell.command",
        "spark.remote",
        "spark.submit.deployMode",
        "spark.test.home",
    }
)
"""Every setting name among the constants of Spark 4's ``spark-launcher`` jar: the only settings whose
values can change the launcher's answer (``spark.launcher.*`` too, :data:`LAUNCHER_CONF_PREFIXES`).
Any other ``--conf`` reaches the driver as an argument and is not part of a plan's key."""

LAUNCHER_CONF_PREFIXES = ("spark.launcher.",)
ENV_PREFIXES = ("SPARK_", "PYSPARK_", "HADOOP_", "YARN_")
ENV_NAMES = frozenset(
    {
        "JAVA_HOME",
        "LD_LIBRARY_PATH",
        "DYLD_LIBRARY_PATH",
        "_JAVA_OPTIONS",
        "JAVA_TOOL_OPTIONS",
        "JDK_JAVA_OPTIONS",
    }
)
"""Environment variables that are part of a plan's key, with every one starting with ``ENV_PREFIXES``."""

UNSUPPORTED_ARGS = ("--properties-file",)
"""Arguments whose effect on the command lies outside the arguments (another file's content)."""

_SCALA_EXPORT = re.compile(r"^export SPARK_SCALA_VERSION=([0-9.]+)\s*$", re.MULTILINE)
_PATCH_LOCK = threading.RLock()
_POPEN = "Popen"
"""The name under which ``pyspark.java_gateway`` calls ``subprocess.Popen`` to start spark-submit."""


@dataclass(frozen=True)
class DriverLaunch:
    """The driver JVM's command and environment, as spark-submit's scripts would have run them."""

    command: tuple[str, ...]
    env: dict[str, str]
    planned: bool
    """The command's head came from a kept plan (no launcher JVM ran for this start)."""


def _pairs(args: Sequence[str], takes_value: Callable[[str], bool]) -> Iterator[tuple[str, ...]]:
    """``args`` as (option, value) pairs, for the options ``takes_value`` names, and single words."""
    words = list(args)
    i = 0
    while i < len(words):
        if takes_value(words[i]) and i + 1 < len(words):
            yield words[i], words[i + 1]
            i += 2
        else:
            yield (words[i],)
            i += 1


def masked_args(args: Sequence[str]) -> list[str]:
    """``args`` without the ``--conf`` settings the launcher does not read (the rest as they are)."""
    kept: list[str] = []
    for item in _pairs(args, lambda word: word == "--conf"):
        name = item[-1].partition("=")[0]
        if len(item) == 1 or name in LAUNCHER_CONFS or name.startswith(LAUNCHER_CONF_PREFIXES):
            kept += item
    return kept


def _file_digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return "-"


def plan_key(args: Sequence[str], env: Mapping[str, str], home: Path, java: Path) -> str:
    """A digest of everything the launcher's answer depends on (see the module docstring)."""
    conf_dir = Path(env.get("SPARK_CONF_DIR") or home / "conf")
    variables = sorted(
        (name, value) for name, value in env.items() if name in ENV_NAMES or name.startswith(ENV_PREFIXES)
    )
    material = {
        "format": FORMAT,
        "home": str(home),
        "java": str(java),
        "build": archive_key(java, home),
        "args": masked_args(args),
        "env": variables,
        "defaults": _file_digest(conf_dir / "spark-defaults.conf"),
        "java-opts": _file_digest(conf_dir / "java-opts"),
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:24]


def parse_launcher_output(out: bytes) -> list[str]:
    """The command the launcher printed for bash: NUL-terminated words after a NUL line."""
    text = out.decode()
    if "\0\n" in text:  # lines before it are messages spark-class would echo
        text = text.split("\0\n", 1)[1]
    words = text.split("\0")
    if words and words[-1] == "":
        words.pop()
    return words


def _items(args: Sequence[str]) -> Counter[tuple[str, ...]]:
    """Arguments as (option, value) pairs and single words, counted: their order left aside."""
    return Counter(_pairs(args, lambda word: word.startswith("--") and "=" not in word))


def plan_head(command: Sequence[str], args: Sequence[str]) -> list[str] | None:
    """The launcher's ``command`` up to and including the SparkSubmit class, when what follows is
    exactly ``args`` in some order; else None (the answer depends on more than a plan keeps)."""
    if SUBMIT_CLASS not in command:
        return None
    cut = list(command).index(SUBMIT_CLASS) + 1
    tail = command[cut:]
    if _items(tail) != _items(args):  # the same pairs hold the same words
        return None
    return list(command[:cut])


def script_env(environ: Mapping[str, str], home: Path) -> dict[str, str] | None:
    """The environment spark-submit's scripts would give the driver JVM; None where they would do
    more than export these (a ``spark-env.sh`` to source, a testing or development switch)."""
    if any(environ.get(name) for name in ("SPARK_TESTING", "SPARK_SQL_TESTING", "SPARK_PREPEND_CLASSES")):
        return None
    try:
        found = _SCALA_EXPORT.search((home / "bin" / "load-spark-env.sh").read_text())
    except OSError:
        return None
    if found is None:
        return None
    env = dict(environ)
    env.setdefault("SPARK_HOME", str(home))
    if not env.get("SPARK_ENV_LOADED"):
        env["SPARK_ENV_LOADED"] = "1"
        env["SPARK_CONF_DIR"] = env.get("SPARK_CONF_DIR") or str(home / "conf")
        if (Path(env["SPARK_CONF_DIR"]) / "spark-env.sh").is_file():
            return None
    env["SPARK_SCALA_VERSION"] = found.group(1)
    env["PYTHONHASHSEED"] = "0"
    return env


def _plans_dir_refusal(plans_dir: Path) -> str | None:
    """Why plans cannot be kept and used in ``plans_dir`` (made 0700 when missing), or None."""
    try:
        private_dir(plans_dir)
    except (OSError, ConfigError) as exc:
        return str(exc)
    return others_could_change(plans_dir)


def _load_plan(path: Path) -> list[str] | None:
    if others_could_change(path) is not None:  # missing, or a command someone else could have put
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    head = data.get("head") if isinstance(data, dict) else None
    if not isinstance(head, list) or not head or head[-1] != SUBMIT_CLASS:
        return None
    if not all(isinstance(word, str) for word in head):
        return None
    return head


def _keep_plan(path: Path, head: list[str]) -> None:
    partial = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, PRIVATE_FILE_MODE)
    os.fchmod(fd, PRIVATE_FILE_MODE)  # a leftover partial of the same name keeps its old mode otherwise
    with os.fdopen(fd, "w") as handle:
        handle.write(json.dumps({"format": FORMAT, "head": head}))
    os.replace(partial, path)
    plans = sorted(path.parent.glob("plan-*.json"), key=_age_key, reverse=True)
    for old in plans[PLANS_KEPT:]:
        old.unlink(missing_ok=True)


def _age_key(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except FileNotFoundError:  # another driver's start pruned it meanwhile
        return 0


def run_launcher(args: Sequence[str], env: Mapping[str, str], home: Path, java: Path) -> list[str] | None:
    """The driver's command as Spark's launcher prints it for ``spark-submit <args>`` (what
    ``spark-class`` runs first); None when the launcher fails (spark-submit then reports why)."""
    launcher = [
        str(java),
        "-Xmx128m",
        *shlex.split(env.get("SPARK_LAUNCHER_OPTS", "")),
        "-cp",
        str(home / "jars" / "*"),
        LAUNCHER_CLASS,
        SUBMIT_CLASS,
        *args,
    ]
    done = subprocess.run(
        launcher, env=dict(env), capture_output=True, timeout=LAUNCHER_TIMEOUT_S, check=False
    )
    if done.returncode != 0:
        log.debug("spark's launcher exited %d: the driver starts through spark-submit", done.returncode)
        return None
    if done.stderr:
        sys.stderr.write(done.stderr.decode(errors="replace"))
    return parse_launcher_output(done.stdout)


def driver_launch(args: Sequence[str], environ: Mapping[str, str], plans_dir: Path) -> DriverLaunch | None:
    """How to start the driver JVM that ``spark-submit <args>`` would start, without the scripts
    and, once a plan is kept, without the launcher JVM; None: start it through spark-submit."""
    home = spark_home(environ)
    java = java_binary(environ)
    unsupported = any(arg.split("=", 1)[0] in UNSUPPORTED_ARGS for arg in args)
    if os.name != "posix" or unsupported or home is None or java is None:
        return None
    env = script_env(environ, home)
    if env is None:
        return None
    plan = plans_dir / f"plan-{plan_key(args, env, home, java)}.json"
    refusal = _plans_dir_refusal(plans_dir)
    head = _load_plan(plan) if refusal is None else None
    if head is not None:
        return DriverLaunch((*head, *args), env, planned=True)
    command = run_launcher(args, env, home, java)
    if command is None:
        return None
    head = plan_head(command, args)
    if head is None:  # the launcher did more than echo the arguments: use its answer, keep nothing
        return DriverLaunch(tuple(command), env, planned=False)
    if refusal is None:
        try:
            _keep_plan(plan, head)
        except OSError as exc:
            refusal = str(exc)
    if refusal is not None:  # this start goes on; the next one asks the launcher again
        log.warning(
            "the driver's launch plans are not kept in %s (%s): make WIDEHOUSE_SPARK_LAUNCH_PLANS_DIR a "
            "directory only this user can write, or off",
            plans_dir,
            refusal,
        )
    return DriverLaunch((*head, *args), env, planned=False)


@contextmanager
def direct_launch(plans_dir: Path | None) -> Iterator[None]:
    """Inside it, a driver JVM pyspark starts (``launch_gateway``'s spark-submit) is started as
    :func:`driver_launch` says; nothing changes with ``plans_dir`` None or a JVM already running."""
    if plans_dir is None:
        yield
        return
    import pyspark.java_gateway as gateway

    with _PATCH_LOCK:
        original = getattr(gateway, _POPEN)

        def popen(command: list[str], **kwargs: Any) -> Any:
            launch = None
            if command and os.path.basename(command[0]) == "spark-submit":
                try:
                    launch = driver_launch(command[1:], kwargs.get("env") or os.environ, plans_dir)
                except (OSError, ValueError, subprocess.SubprocessError) as exc:
                    log.warning("starting the driver through spark-submit: its launch plan failed (%s)", exc)
            if launch is None:
                return original(command, **kwargs)
            return original(list(launch.command), **{**kwargs, "env": launch.env})

        setattr(gateway, _POPEN, popen)
        try:
            yield
        finally:
            setattr(gateway, _POPEN, original)

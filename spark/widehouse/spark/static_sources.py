"""Spark's look-up of installed Python data sources, answered in this process when it finds none.

The first time a session touches a Python data source (``spark.dataSource.register``, a
``format(...)`` look-up), Spark 4 looks for *static* ones: it starts a Python process
(``pyspark.sql.worker.lookup_data_sources``) that imports every top-level ``pyspark_*`` module on
its path and registers the ``DefaultSource`` of each. On this box that process costs ~0.85 s, on the
critical path of every stream's start (the groups' first ``register`` waits for it). Widehouse
registers its sources by hand and installs no ``pyspark_*`` package.

:func:`answer_static_lookup` scans this interpreter's path the same way (``pkgutil.iter_modules``,
~16 ms) and, when nothing there is named ``pyspark_*`` and Spark's planners run this very
interpreter, hands Spark the look-up's answer, no data sources, through the JVM's one cache of it
(``DataSourceManager.dataSourceBuilders``, a field Spark keeps settable for its tests). Otherwise,
or when that field is not where Spark 4.2 has it, Spark does its own look-up as before.
"""

from __future__ import annotations

import logging
import os
import pkgutil
import sys
from typing import TYPE_CHECKING, Any

from widehouse.spark.fork_server import is_launcher

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

PREFIX = "pyspark_"
"""Spark's rule: a top-level module so named may hold a static data source (``DefaultSource``)."""
MANAGER = "org.apache.spark.sql.execution.datasources.DataSourceManager$"
"""The Scala object holding the JVM's one answer (``dataSourceBuilders``: None until looked up)."""


def scala_object(jvm: Any, name: str) -> Any:
    """A Scala ``object`` through py4j (its class ``name``, ending in ``$``, and that class's instance)."""
    return getattr(getattr(jvm, name), "MODULE$")


def planner_python(session: SparkSession) -> str | None:
    """The interpreter Spark starts its data source planners and stream readers with: the driver
    JVM's ``PYSPARK_PYTHON`` ("" when unset, ``python3`` from PATH, or when the context has no JVM
    any more), or None without a JVM handle at all (Spark Connect). Not this process's variable: the
    JVM kept the one it was started with."""
    try:
        jvm: Any = session.sparkContext._jvm
        return (jvm.java.lang.System.getenv("PYSPARK_PYTHON") or "") if jvm is not None else ""
    except Exception:  # Spark Connect has no JVM handle
        return None


def static_candidates() -> list[str]:
    """Top-level modules on this interpreter's path that Spark's look-up would import."""
    return sorted(m.name for m in pkgutil.iter_modules() if m.name.startswith(PREFIX))


def answer_static_lookup(session: SparkSession, python: str | None = None) -> bool:
    """Tell Spark this process's sessions have no static Python data sources, when that is so.

    ``python`` is the interpreter of Spark's planners (default :func:`planner_python`); the answer
    is given only when it is this one and :func:`static_candidates` is empty. True when given (or
    when Spark already has an answer); False when Spark is left to look for itself."""
    planners = python if python is not None else planner_python(session)
    # not resolved: a virtualenv's python links to its base interpreter, whose path is another
    if not planners or (
        os.path.abspath(planners) != os.path.abspath(sys.executable) and not is_launcher(planners)
    ):
        return False
    found = static_candidates()
    if found:
        log.debug("Python modules %s may hold data sources: Spark looks them up itself", found)
        return False
    try:
        jvm: Any = session.sparkContext._jvm
        manager = scala_object(jvm, MANAGER)
        if not manager.dataSourceBuilders().isEmpty():
            return True  # already looked up (an earlier session of this JVM)
        nothing = scala_object(jvm, "scala.collection.immutable.Map$").empty()
        getattr(manager, "dataSourceBuilders_$eq")(scala_object(jvm, "scala.Some$").apply(nothing))
    except Exception as exc:  # another Spark, or Spark Connect: its own look-up, as before
        log.debug("Spark's data source look-up left to Spark: %s", exc)
        return False
    return True

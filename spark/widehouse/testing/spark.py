"""A small local SparkSession for tests and benchmarks that start their own (a test's app process,
a benchmark): two cores, two shuffle partitions, no UI."""

from __future__ import annotations

from typing import TYPE_CHECKING

from widehouse.settings import Settings, load_settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SMALL_SPARK_CONF = {
    "spark.master": "local[2]",
    "spark.sql.shuffle.partitions": "2",
    "spark.ui.enabled": "false",
}


def small_session(app_name: str, settings: Settings | None = None) -> SparkSession:
    """The process's session on :data:`SMALL_SPARK_CONF` (``settings`` default: the environment's)."""
    from widehouse.spark.session import build_session

    return build_session(settings if settings is not None else load_settings(), app_name, SMALL_SPARK_CONF)

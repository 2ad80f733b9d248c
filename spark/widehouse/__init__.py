"""Widehouse: real-time wide tables from thousands of Pulsar event topics.

The package is split by weight:

- light, pyspark-free parts that Airflow DAGs and the CLI import: :mod:`widehouse.settings`,
  :mod:`widehouse.services`, :mod:`widehouse.clickhouse`, :mod:`widehouse.hbase`, ...
- the Spark side under :mod:`widehouse.spark`, imported only by jobs and tests.
"""

from __future__ import annotations

__version__ = "0.1.0"

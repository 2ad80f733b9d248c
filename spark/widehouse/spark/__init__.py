"""The Spark side of Widehouse: everything here imports pyspark.

Import these modules only from Spark job entrypoints, tests and benchmarks, never from dags/ or
from the light core.
"""

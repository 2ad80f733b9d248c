"""The streaming job's pyspark-free parts: the per-batch transform, the Arrow merge, table names,
run options and measurements (importable by DAGs and executors alike)."""

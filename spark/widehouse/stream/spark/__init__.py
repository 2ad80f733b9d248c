"""The streaming wide-table job on Spark: the query per slot group, its batch writer and sinks."""

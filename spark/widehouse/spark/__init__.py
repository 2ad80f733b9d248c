"""The Spark session factory shared by every Spark job (:mod:`widehouse.spark.session`).

Each domain keeps its own Spark side in a leaf named ``spark`` (``widehouse.source.spark``,
``widehouse.stream.spark``, ``widehouse.catalog.spark``, ...); only those leaves import pyspark.
"""

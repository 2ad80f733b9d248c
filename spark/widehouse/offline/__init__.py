"""Offline (Hive) tables of the daily wide table: demo data and the daily aggregation.

The Spark side is :mod:`widehouse.offline.spark`; the SQL that fills the offline columns is
rendered by :mod:`widehouse.catalog.offline` from the catalog.
"""

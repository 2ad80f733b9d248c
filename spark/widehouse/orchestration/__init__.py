"""What Airflow runs: light task functions behind the DAG files in dags/ (no pyspark, no Airflow at
import time).

- :mod:`.runner`: job entrypoints (``widehouse finalize``, ``daily``, ``pulsar cleanup``) as
  subprocesses, their output in the task log, exit codes mapped to errors.
- :mod:`.connections`: Airflow Connections -> ``WIDEHOUSE_*`` variables, at run time only.
- :mod:`.supervisor` (+ :mod:`.launch`, :mod:`.progress`): keep one streaming app per slot group.
- :mod:`.batch`: the hourly gate and finalize, the daily merge, hour ranges.
- :mod:`.replan`: versioned plans from live traffic.
- :mod:`.params`: the manual operations' trigger-form fields, from the catalog.
- :mod:`.tasks`: the Airflow-facing wrappers the DAG files call (the only module touching Airflow).
"""

"""The batch layer: finalize hours, merge the day with Hive through HBase, publish to both stores.

- Hours and days (parse, check, ranges) are :mod:`widehouse.contracts.periods`'.
- :mod:`.gate` decides from the stream's progress rows whether an hour may be finalized.
- :mod:`.broker` counts what Pulsar holds for a publish-time range; :mod:`.reconcile` compares it
  with what the stream counted in and with the valid, quarantined and late rows.
- :mod:`.final_rows` computes a period's final rows in ClickHouse from the partials (plus, when
  asked, the period's late events folded by :mod:`.late`).
- :mod:`.publish` publishes a period's rows to Delta ``silver/<T>`` and ClickHouse ``<T>_final``
  and commits them in the ledger (:mod:`.ledger`), which is what makes them visible: staged,
  prepared (decided), then committed; the next publisher rolls a crashed one forward.
- :mod:`.lease` lets one publisher at a time work on a (table, period).
- :mod:`.finalize` is the hourly use case; the daily one goes through HBase (:mod:`.daily`).

Nothing here imports pyspark except :mod:`.spark` (the Delta silver writer). Jobs in spark/jobs
and the ``widehouse finalize`` / ``widehouse daily`` commands are the entry points; Airflow calls
them.
"""

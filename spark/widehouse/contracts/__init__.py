"""The shared contracts: what several domains agree on, defined once on the lowest floor.

Every domain (stream, batch, clickhouse, hbase, orchestration, commands, ...) may import these
modules; they import no domain. What lives here:

- ``periods``: the hour and the day (parse, floor, range, limits, CLI argument);
- ``values``: the one family of typed text-value parsers (settings, source and sink options, CLI);
- ``tables``: every internal table's name and shape (the ledger's included);
- ``identity``: app ids, subscriptions, checkpoint paths, asset URIs;
- ``types``: catalog kinds rendered for each store.

Light: no pyspark, no clients; safe to import from DAG files.
"""

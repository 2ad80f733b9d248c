"""Quarantined events repaired back into a wide table after a catalog fix (:mod:`.core`), and the
``widehouse repair`` job (:mod:`.job`). Light: no pyspark here."""

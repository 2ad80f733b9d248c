"""Finalize an hour of an hourly wide table (spark-submit entrypoint).

    spark-submit spark/jobs/finalize_hour.py --table user_hourly --hour 2026-11-22T09 [--force]

argparse -> settings -> :func:`widehouse.batch.jobs.finalize` (the use case
:func:`widehouse.batch.spark.run_finalize`) -> exit code; the same as ``widehouse finalize`` (0 done,
2 bad input, 3 not ready, 4 reconciliation mismatch, 5 busy: another run is publishing the hour,
1 failure).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from widehouse.batch.jobs import add_finalize_arguments, finalize
from widehouse.entrypoint import run_job


def main(argv: Sequence[str] | None = None) -> int:
    return run_job("finalize_hour", __doc__, add_finalize_arguments, finalize, argv)


if __name__ == "__main__":
    sys.exit(main())

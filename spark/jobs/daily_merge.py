"""Daily merge of a daily wide table through HBase (spark-submit entrypoint).

    spark-submit spark/jobs/daily_merge.py --day 2026-11-22 [--table user_daily] [--salt-buckets 16]

argparse -> settings -> :func:`widehouse.batch.jobs.daily` (the use case
:func:`widehouse.batch.daily.spark.run_daily_job`) -> exit code; the same as ``widehouse daily``
(0 published, 2 bad input or missing Hive partition, 5 busy: another run holds the day, 1 failure;
nothing published unless 0).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from widehouse.batch.jobs import add_daily_arguments, daily
from widehouse.entrypoint import run_job


def main(argv: Sequence[str] | None = None) -> int:
    return run_job("daily_merge", __doc__, add_daily_arguments, daily, argv)


if __name__ == "__main__":
    sys.exit(main())

"""Daily merge of a daily wide table through HBase (spark-submit entrypoint).

    spark-submit spark/jobs/daily_merge.py --day 2026-11-22 [--table user_daily] [--salt-buckets 16]

argparse -> settings -> :func:`widehouse.batch.jobs.daily` (the use case
:func:`widehouse.batch.daily.spark.run_daily_job`) -> exit code; the same as ``widehouse daily``
(0 published, 2 bad input or missing Hive partition, 5 busy: another run holds the day, 1 failure;
nothing published unless 0).
"""

from __future__ import annotations

import argparse
import logging
import sys

from widehouse.batch.jobs import add_daily_arguments, daily
from widehouse.errors import ConfigError, WidehouseError
from widehouse.settings import load_settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="daily_merge.py", description=__doc__.splitlines()[0])
    add_daily_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return daily(args, load_settings())
    except ConfigError as exc:
        print(f"daily_merge: configuration error: {exc}", file=sys.stderr)
        return 2
    except WidehouseError as exc:
        print(f"daily_merge: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

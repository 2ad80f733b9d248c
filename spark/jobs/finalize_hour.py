"""Finalize an hour of an hourly wide table (spark-submit entrypoint).

    spark-submit spark/jobs/finalize_hour.py --table user_hourly --hour 2026-11-22T09 [--force]

argparse -> settings -> :func:`widehouse.batch.jobs.finalize` (the use case
:func:`widehouse.batch.spark.run_finalize`) -> exit code; the same as ``widehouse finalize`` (0 done,
2 bad input, 3 not ready, 4 reconciliation mismatch, 5 busy: another run is publishing the hour,
1 failure).
"""

from __future__ import annotations

import argparse
import logging
import sys

from widehouse.batch.jobs import add_finalize_arguments, finalize
from widehouse.errors import ConfigError, WidehouseError
from widehouse.settings import load_settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="finalize_hour.py", description=__doc__.splitlines()[0])
    add_finalize_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return finalize(args, load_settings())
    except ConfigError as exc:
        print(f"finalize_hour: configuration error: {exc}", file=sys.stderr)
        return 2
    except WidehouseError as exc:
        print(f"finalize_hour: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

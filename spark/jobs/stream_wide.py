"""Streaming wide-table job for slot groups (spark-submit entrypoint).

    spark-submit spark/jobs/stream_wide.py --group g001 [--plan PLAN.json]
    python spark/jobs/stream_wide.py --all-groups --available-now

argparse -> settings -> :func:`widehouse.stream.spark.job.stream` -> exit code; the same as
``widehouse stream`` (both parse and resolve their arguments with :mod:`widehouse.stream.options`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from widehouse.entrypoint import run_job
from widehouse.stream.options import add_arguments
from widehouse.stream.spark.job import stream


def main(argv: Sequence[str] | None = None) -> int:
    return run_job("stream_wide", __doc__, add_arguments, stream, argv)


if __name__ == "__main__":
    sys.exit(main())

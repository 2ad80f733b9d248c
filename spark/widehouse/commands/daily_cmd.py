"""``widehouse daily``: merge a day of a daily wide table with its offline Hive data through HBase
and publish it.

The arguments, the use case and the exit codes are the library's (:mod:`widehouse.batch.jobs`),
shared with the job ``spark/jobs/daily_merge.py``: 0 published, 2 bad input or a missing Hive
partition of the day, 5 busy (another run holds the day), 1 any other failure (e.g. HBase
unreachable). Nothing is published unless the exit code is 0.
"""

from __future__ import annotations

from typing import Any

from widehouse.batch.jobs import add_daily_arguments, daily


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "daily",
        help="daily merge: stream day columns + offline Hive columns via HBase -> ClickHouse + Delta",
        description=__doc__.splitlines()[0],
    )
    add_daily_arguments(parser)
    parser.set_defaults(func=daily)

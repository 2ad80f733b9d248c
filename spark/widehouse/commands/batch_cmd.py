"""``widehouse finalize``: publish an hour of an hourly wide table.

The arguments, the use case and the exit codes are the library's (:mod:`widehouse.batch.jobs`),
shared with the job ``spark/jobs/finalize_hour.py``: 0 published, 2 bad input, 3 not ready (a
feeding group's watermark is behind), 4 reconciliation mismatch (nothing published), 5 busy
(another run is publishing the hour), 1 any other failure.
"""

from __future__ import annotations

from typing import Any

from widehouse.batch.jobs import add_finalize_arguments, finalize


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "finalize",
        help="finalize an hour: gate on the watermark, reconcile, publish to ClickHouse + Delta",
        description=__doc__.splitlines()[0],
    )
    add_finalize_arguments(parser)
    parser.set_defaults(func=finalize)

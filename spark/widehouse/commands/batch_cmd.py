"""``widehouse finalize`` and ``widehouse daily``: publish a period of a wide table.

The arguments, the use cases and the exit codes are the library's (:mod:`widehouse.batch.jobs`),
shared with the jobs ``spark/jobs/finalize_hour.py`` and ``spark/jobs/daily_merge.py``.

- ``finalize`` publishes an hour of an hourly wide table: 0 published, 2 bad input, 3 not ready (a
  feeding group's watermark is behind), 4 reconciliation mismatch (nothing published), 5 busy
  (another run is publishing the hour), 1 any other failure.
- ``daily`` merges a day of a daily wide table with its offline Hive data through HBase and
  publishes it: 0 published, 2 bad input or a missing Hive partition of the day, 5 busy (another
  run holds the day), 1 any other failure (e.g. HBase unreachable). Nothing is published unless
  the exit code is 0.
"""

from __future__ import annotations

from typing import Any

from widehouse.batch.jobs import add_daily_arguments, add_finalize_arguments, daily, finalize
from widehouse.commands.command import add_command

_COMMANDS = (
    (
        "finalize",
        finalize,
        add_finalize_arguments,
        "finalize an hour: gate on the watermark, reconcile, publish to ClickHouse + Delta",
        "``widehouse finalize``: publish an hour of an hourly wide table.",
    ),
    (
        "daily",
        daily,
        add_daily_arguments,
        "daily merge: stream day columns + offline Hive columns via HBase -> ClickHouse + Delta",
        "``widehouse daily``: merge a day of a daily wide table with its offline Hive data through HBase "
        "and publish it.",
    ),
)


def register(subparsers: Any) -> None:
    for name, use_case, add_arguments, help, description in _COMMANDS:
        add_arguments(add_command(subparsers, name, use_case, help=help, description=description))

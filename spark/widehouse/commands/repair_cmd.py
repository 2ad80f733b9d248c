"""``widehouse repair``: quarantined events re-parsed with the current catalog and folded back into a
wide table, exactly once; the periods they touch re-published (:mod:`widehouse.repair`).

Exit codes: 0 done, 2 bad input, 3 / 4 a touched period not re-published (not ready / mismatch;
the next repair re-publishes it), 5 busy (another repair of the table runs), 1 any other failure.
"""

from __future__ import annotations

from typing import Any

from widehouse.commands.command import add_command
from widehouse.repair.job import add_repair_arguments, repair_command


def register(subparsers: Any) -> None:
    parser = add_command(
        subparsers,
        "repair",
        repair_command,
        help="repair quarantined events after a catalog fix: re-parse, fold, re-publish touched periods",
        description="Re-parse the quarantined events of a wide table with the current catalog, fold the "
        "now-valid ones into the table exactly once, and re-publish the periods they touch.",
    )
    add_repair_arguments(parser)

"""Analyst views (hand-written, ``sql/analyst/*.sql``, applied in file-name order).

They read the analyst views of the wide tables (``user_daily``, ...) and the stream's side tables,
in the client's database; each file is one ``CREATE OR REPLACE VIEW``. Applied by the batch jobs and
``widehouse catalog ddl --apply``'s callers after the wide tables exist.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from widehouse.clickhouse.ddl import check_cluster
from widehouse.errors import ClickHouseError

if TYPE_CHECKING:
    from widehouse.clickhouse import ClickHouse

ANALYST_DIR = "analyst"
_VIEW_RE = re.compile(r"CREATE OR REPLACE VIEW ([a-z_][a-z0-9_]*)\s+AS", re.IGNORECASE)


def view_files(sql_dir: Path) -> list[Path]:
    return sorted((sql_dir / ANALYST_DIR).glob("*.sql"))


def view_names(sql_dir: Path) -> list[str]:
    """The views the files create (``CREATE OR REPLACE VIEW <name>``), in file order."""
    names = []
    for path in view_files(sql_dir):
        match = _VIEW_RE.search(path.read_text(encoding="utf-8"))
        if match is None:
            raise ClickHouseError(f"{path}: no CREATE OR REPLACE VIEW <name> statement")
        names.append(match.group(1))
    return names


def view_statement(path: Path, cluster: str | None = None) -> str:
    """The file's ``CREATE OR REPLACE VIEW`` without comments; on a cluster ``ON CLUSTER '<name>'``.

    Nothing else changes on a cluster: the files read the wide tables' analyst views (which read the
    Distributed tables) and the side tables (a full replica on every node) by name."""
    statement = (
        "\n".join(
            line
            for line in path.read_text(encoding="utf-8").splitlines()
            if not line.lstrip().startswith("--")
        )
        .strip()
        .rstrip(";")
    )
    if cluster is None:
        return statement
    on = f"ON CLUSTER '{check_cluster(cluster)}'"
    statement, found = _VIEW_RE.subn(lambda m: f"CREATE OR REPLACE VIEW {m.group(1)} {on} AS", statement, 1)
    if not found:
        raise ClickHouseError(f"{path}: no CREATE OR REPLACE VIEW <name> statement")
    return statement


def ensure_analyst_views(client: ClickHouse, sql_dir: Path) -> list[str]:
    """Create or replace every analyst view (on every node of the client's cluster, if it has one);
    returns their file names."""
    done = []
    for path in view_files(sql_dir):
        statement = view_statement(path, client.cluster)
        try:
            client.command(statement)
        except Exception as exc:  # the engine's message names the problem
            raise ClickHouseError(f"analyst view {path.name} failed: {exc}") from exc
        done.append(path.name)
    return done

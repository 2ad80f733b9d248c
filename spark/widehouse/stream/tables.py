"""Where every table the stream writes lives, and how the stream creates them.

The side tables' names and shapes (quarantine, late events, progress, per-hour counts, sink marks)
are declared once in :mod:`widehouse.contracts.tables`, with the map of what lives where; wide
tables are described by the catalog (:mod:`widehouse.clickhouse.ddl` for ClickHouse,
:mod:`widehouse.catalog.schema` for Delta).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from widehouse.contracts.tables import STREAM_SHAPES
from widehouse.settings import DeltaSettings

if TYPE_CHECKING:
    from widehouse.catalog import Catalog
    from widehouse.clickhouse import ClickHouse


def ensure_clickhouse(client: ClickHouse, catalog: Catalog) -> list[str]:
    """Create or migrate every ClickHouse object the stream writes: the catalog's wide tables (new
    catalog columns are added in place) and the side tables. Returns the statements run."""
    return [*client.ensure_wide_tables(catalog), *client.ensure_shapes(STREAM_SHAPES)]


def delta_partials(delta: DeltaSettings, table: str) -> str:
    """The bronze Delta table of a wide table's partial rows."""
    return delta.path("bronze", f"{table}_partials")


def delta_side(delta: DeltaSettings, name: str) -> str:
    """The bronze Delta table of a side table (:data:`widehouse.contracts.tables.SIDE_SHAPES`)."""
    return delta.path("bronze", name)

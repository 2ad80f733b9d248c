"""A period's final rows, computed by ClickHouse from the stream's partials (one computation: the
publish stages it in ``<T>_final`` with an ``INSERT ... SELECT`` and Delta receives the staged
rows, so both stores hold identical rows)."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from widehouse.batch.publish import FinalSelect
from widehouse.clickhouse.ddl import merge_expression, q, table_names
from widehouse.contracts.periods import sql_time

if TYPE_CHECKING:
    import pyarrow as pa

    from widehouse.catalog import WideTable
    from widehouse.clickhouse import ClickHouse


def final_hour_sql(table: WideTable, sources: list[str]) -> str:
    """SELECT of the hour's final rows (key, hour, columns) over one or more partial tables."""
    key = q(table.key_name)
    union = "\nUNION ALL\n".join(
        f"SELECT * FROM {source} WHERE `hour` = {{h:DateTime('UTC')}}" for source in sources
    )
    select = [f"p.{key} AS {key}", "p.`hour` AS `hour`"]
    select += [f"{merge_expression(c)} AS {q(c.name)}" for c in table.columns]
    return (
        "SELECT\n    " + ",\n    ".join(select) + f"\nFROM ({union}) AS p\n"
        f"GROUP BY p.{key}, p.`hour`\nORDER BY p.{key}"
    )


def final_hour_select(table: WideTable, hour: dt.datetime, extra: list[str] | None = None) -> FinalSelect:
    """The hour's final rows of ``table`` from ``<T>_partial`` (and ``extra`` partial-shaped
    tables), as a SELECT the publish runs inside ClickHouse."""
    sources = [q(table_names(table).partial), *(extra or [])]
    return FinalSelect(final_hour_sql(table, sources), {"h": sql_time(hour)})


def final_hour_rows(
    client: ClickHouse, table: WideTable, hour: dt.datetime, extra: list[str] | None = None
) -> pa.Table:
    """The same rows as Arrow (benchmarks and checks read them; the publish does not)."""
    select = final_hour_select(table, hour, extra)
    return client.arrow(select.sql, select.parameters)

"""The demo catalog in schemas/ stays valid, BIGO-sized, and in sync with the generated DDL in sql/."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from widehouse.catalog import Catalog, load_catalog
from widehouse.clickhouse import ddl

ROOT = Path(__file__).parents[3]


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog(ROOT / "schemas")


def test_sizes(catalog: Catalog) -> None:
    assert 38 <= len(catalog.topics) <= 46
    tenants = {t.name.tenant for t in catalog.topics}
    namespaces = {t.name.full_namespace for t in catalog.topics}
    assert len(tenants) >= 2 and len(namespaces) >= 4
    hourly, daily = catalog.table("user_hourly"), catalog.table("user_daily")
    assert (hourly.grain, daily.grain) == ("hour", "day")
    assert 55 <= len(hourly.columns) <= 65
    assert 75 <= len(daily.columns) <= 85
    assert 18 <= len(daily.offline_columns) <= 22
    assert len(daily.offline) == 3


def test_realistic_variety(catalog: Catalog) -> None:
    names = {t.name.local for t in catalog.topics}
    for expected in (
        "login",
        "page_view",
        "click",
        "search",
        "video_play",
        "live_enter",
        "gift_send",
        "purchase",
        "live_like",
        "live_comment",
        "video_share",
        "follow",
        "message_send",
    ):
        assert expected in names
    aggregates = Counter(m.agg for t in catalog.topics for m in t.mappings)
    assert set(aggregates) == {"count", "sum", "min", "max", "first", "last"}
    assert sum(1 for t in catalog.topics for m in t.mappings if m.filter) >= 20
    assert any(m.field and len(m.field) > 1 for t in catalog.topics for m in t.mappings)  # nested sources
    kinds = {f.type.kind for t in catalog.topics for f in t.fields}
    assert {"long", "int", "double", "string", "boolean", "timestamp-ms", "array", "map", "object"} <= kinds
    assert {t.key for t in catalog.topics} == {"uid", "user_id"}  # key fields may differ per topic
    assert all(t.mappings for t in catalog.topics)


def test_generated_clickhouse_ddl_files_are_up_to_date(catalog: Catalog) -> None:
    for table in catalog.wide_tables:
        path = ROOT / "sql" / "clickhouse" / f"{table.name}.sql"
        assert path.read_text() == ddl.render_sql_file(table, "wh"), "run `widehouse catalog ddl`"


def test_offline_sql_files_exist_and_are_documented(catalog: Catalog) -> None:
    readme = (ROOT / "sql" / "README.md").read_text()
    for source in catalog.table("user_daily").offline:
        assert source.sql_path.is_file()
        assert source.sql in readme
    assert (ROOT / "sql" / "hive" / "offline_tables.sql").is_file()

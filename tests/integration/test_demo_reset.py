"""The demo's reset against the real services: what a previous run left is gone, records included."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.conftest import settings_for
from widehouse import clickhouse
from widehouse.batch import ledger
from widehouse.catalog import load_catalog
from widehouse.contracts.tables import BATCH_SHAPES, LEDGER, PUBLICATIONS
from widehouse.settings import Settings

pytestmark = [pytest.mark.integration, pytest.mark.clickhouse]


def test_the_reset_drops_the_publications_with_the_ledger(services: Settings, tmp_path: Path) -> None:
    """A second demo on the same day failed at the daily publish: the reset dropped the ledger and
    the staged rows but kept the publications, so the first run's committed publication looked
    prepared and uncommitted, with nothing staged to roll forward."""
    from widehouse.demo.spark import _reset

    suffix = "reset" + uuid.uuid4().hex[:6]
    settings = settings_for(
        tmp_path, WIDEHOUSE_TENANT_SUFFIX=suffix, WIDEHOUSE_CLICKHOUSE_DATABASE=f"wh_{suffix}"
    )
    client = clickhouse.connect(settings.clickhouse)
    try:
        assert client.scalar("SELECT currentDatabase()") == f"wh_{suffix}"  # never a developer's tables
        ledger.ensure(client)
        client.command(
            f"INSERT INTO {PUBLICATIONS} (`table`, period, finalized_at, run_id, rows) "
            "VALUES ('user_daily', '2026-11-27 00:00:00', '2026-11-27 06:53:04', 'earlier', 5000)"
        )
        assert client.scalar(f"SELECT count() FROM {PUBLICATIONS}") == 1
        _reset(settings, load_catalog(settings.schemas_dir), tmp_path / "demo", lambda _line: None)
        left = {
            str(r[0])
            for r in client.rows("SELECT name FROM system.tables WHERE database = currentDatabase()")
        }
        assert not left & {shape.name for shape in BATCH_SHAPES}, left
        assert LEDGER not in left and PUBLICATIONS not in left
    finally:
        client.command(f"DROP DATABASE IF EXISTS `wh_{suffix}`")
        client.close()

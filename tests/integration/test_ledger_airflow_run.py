"""A ledger made before it had ``airflow_run``, on the real ClickHouse service: the view still reads
it, ``ensure`` (what every finalize and daily run calls first) adds the column to the ledger and the
publications, older rows read '', a new row keeps its run, and the cells link as the rows say."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from tests.conftest import settings_for
from widehouse import clickhouse
from widehouse.batch import ledger
from widehouse.catalog import load_catalog
from widehouse.clickhouse import ClickHouse, ddl
from widehouse.contracts.tables import LEDGER, LEDGER_SHAPE, PUBLICATIONS, RECONCILIATION_SHAPE
from widehouse.operations.health import Cell, TableSpec, Window, read_strips
from widehouse.operations.page import cell_link
from widehouse.settings import Settings
from widehouse.shape import Shape

pytestmark = [pytest.mark.integration, pytest.mark.clickhouse]

T0 = dt.datetime(2026, 11, 20, tzinfo=dt.UTC)
H = dt.timedelta(hours=1)
NOW = T0 + 10 * H
OLD_COLUMNS = tuple(c for c in LEDGER_SHAPE.columns if c.name != "airflow_run")
OLD_LEDGER = Shape(LEDGER, OLD_COLUMNS, "period", ("table", "period", "finalized_at"))
OLD_PUBLICATIONS = Shape(PUBLICATIONS, OLD_COLUMNS, "period", ("table", "period", "finalized_at"))
"""The two tables as the code before ``airflow_run`` created them."""
REFINALIZE = "widehouse_refinalize/manual__2026-11-20T09:12:00.5+00:00"


def entry(period: dt.datetime, at: dt.datetime, run_id: str, **more: object) -> dict[str, object]:
    row = {"table": "user_hourly", "period": period, "finalized_at": at, "run_id": run_id, "kind": "hour"}
    flags = {"forced": False, "include_late": False, "late_rows": 0, "reconciliation": "ok", "note": ""}
    return {**row, "rows": 7, **flags, **more}


@pytest.fixture
def client(services: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClickHouse]:
    state = tmp_path_factory.mktemp("ledger-state")
    settings = settings_for(state, WIDEHOUSE_CLICKHOUSE_DATABASE=f"it_ledger_{uuid.uuid4().hex[:8]}")
    connected = clickhouse.connect(settings.clickhouse)
    try:
        yield connected
    finally:
        connected.command(f"DROP DATABASE IF EXISTS {connected.database}")
        connected.close()


def columns(client: ClickHouse, table: str) -> list[str]:
    rows = client.rows(
        "SELECT name FROM system.columns WHERE database = {db:String} AND table = {t:String} "
        "ORDER BY position",
        {"db": client.database, "t": table},
    )
    return [str(r[0]) for r in rows]


def strips(client: ClickHouse) -> dict[dt.datetime, Cell]:
    spec = TableSpec("user_hourly", "hour", ())
    (strip,) = read_strips(client, [spec], {}, NOW, lateness=H, window=Window(hours=6, days=1))
    return {c.period: c for c in strip.hours}


def test_an_old_ledger_gains_the_column_and_cells_link_as_their_rows_say(client: ClickHouse) -> None:
    client.ensure_shapes([OLD_LEDGER, OLD_PUBLICATIONS, RECONCILIATION_SHAPE])
    old = [entry(T0 + 6 * H, T0 + 7 * H, "r6")]
    client.insert(LEDGER, pa.Table.from_pylist(old, schema=OLD_LEDGER.arrow_schema()), "old-row")
    assert "airflow_run" not in columns(client, LEDGER)

    # the view on the old ledger (no finalize since the upgrade): no error, the fallback link
    cell = strips(client)[T0 + 6 * H]
    assert (cell.run_id, cell.airflow_run) == ("r6", "")

    ledger.ensure(client)  # what finalize and the daily merge run before they publish
    for table in (LEDGER, PUBLICATIONS):
        assert columns(client, table) == LEDGER_SHAPE.names  # added at the end, as declared
    assert [s for s in client.ensure_shapes([LEDGER_SHAPE]) if "ALTER" in s] == []  # once only

    new = [
        entry(T0 + 8 * H, T0 + 9 * H, "r8", airflow_run=REFINALIZE),
        entry(T0 + 9 * H, T0 + 9 * H + dt.timedelta(minutes=5), "r9"),  # no Airflow run: ''
    ]
    ledger.record(client, new, LEDGER_SHAPE, "new-rows")
    got = client.rows(f"SELECT run_id, airflow_run FROM {LEDGER} ORDER BY period")
    assert got == [("r6", ""), ("r8", REFINALIZE), ("r9", "")]

    cells = strips(client)
    assert [cells[T0 + h * H].airflow_run for h in (6, 8, 9)] == ["", REFINALIZE, ""]
    links = {h: cell_link("widehouse_hourly", cells[T0 + h * H]) for h in (6, 8, 9)}
    assert links == {
        6: "run?dag=widehouse_hourly&period=2026-11-20T06%3A00%3A00%2B00%3A00",
        8: "../dags/widehouse_refinalize/runs/manual__2026-11-20T09%3A12%3A00.5%2B00%3A00",
        9: "run?dag=widehouse_hourly&period=2026-11-20T09%3A00%3A00%2B00%3A00",
    }


def test_catalog_ddl_apply_also_gives_an_old_ledger_the_column(client: ClickHouse) -> None:
    client.ensure_shapes([OLD_LEDGER])
    catalog = load_catalog(Path(__file__).parents[2] / "schemas")
    run = ddl.apply_ddl(client, catalog, client.database)
    assert [s for s in run if s.startswith("ALTER")] == [
        f"ALTER TABLE `{client.database}`.`{LEDGER}` ADD COLUMN IF NOT EXISTS `airflow_run` String"
    ]
    assert columns(client, LEDGER) == LEDGER_SHAPE.names
    assert not [s for s in ddl.apply_ddl(client, catalog, client.database) if s.startswith("ALTER")]

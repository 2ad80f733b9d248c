"""The shared contracts ``tables`` and ``identity``: what they say, and that they are said once.

Expected names are written out by hand (the oracle is this file, not the functions under test);
the grep tests fail when a domain restates a contract instead of importing it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from widehouse.contracts import identity, tables
from widehouse.errors import ConfigError

LIBRARY = Path(__file__).parents[2] / "spark" / "widehouse"
DAGS = Path(__file__).parents[2] / "dags"


def _sources(*roots: Path) -> dict[Path, str]:
    return {p: p.read_text() for root in roots for p in sorted(root.rglob("*.py"))}


def test_internal_tables_have_one_name_each() -> None:
    shapes = [*tables.STREAM_SHAPES, *tables.BATCH_SHAPES]
    names = [s.name for s in shapes]
    assert len(names) == len(set(names))
    assert set(names) == {
        "quarantine",
        "late_events",
        "stream_progress",
        "stream_counts",
        "stream_sink_marks",
        "finalized_periods",
        "publications",
        "reconciliation",
        "publish_leases",
        "repairs",
        "repair_chunks",
    }
    assert tables.PUBLICATION_SHAPE.columns == tables.LEDGER_SHAPE.columns


def test_internal_table_names_are_declared_only_in_contracts_tables() -> None:
    """No module but :mod:`widehouse.contracts.tables` spells an internal table's name as a string."""
    names = {s.name for s in (*tables.STREAM_SHAPES, *tables.BATCH_SHAPES)} - {"quarantine", "reconciliation"}
    home = LIBRARY / "contracts" / "tables.py"
    found = []
    for path, text in _sources(LIBRARY).items():
        if path == home:
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Constant) and node.value in names:
                found.append(f"{path.relative_to(LIBRARY)}:{node.lineno}: {node.value!r}")
    assert found == []


def test_contracts_import_no_domain() -> None:
    allowed = {"widehouse.contracts", "widehouse.errors", "widehouse.shape"}
    for path, text in _sources(LIBRARY / "contracts").items():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("widehouse"):
                assert any(node.module == a or node.module.startswith(a + ".") for a in allowed), path


def test_group_identity() -> None:
    assert identity.group_app_id("widehouse", "g001") == "widehouse-g001"
    assert identity.spark_app_name("widehouse", "g001") == "widehouse-widehouse-g001"
    assert identity.subscription_name("widehouse-g001") == "widehouse-widehouse-g001"
    assert identity.app_of("widehouse-widehouse-g001") == "widehouse-g001"
    assert identity.app_of("other-g001") is None
    with pytest.raises(ConfigError, match="appId"):
        identity.subscription_name("no spaces")


def test_checkpoints_and_assets() -> None:
    assert identity.app_checkpoint_root("s3a://b/cp/", "wh") == "s3a://b/cp/wh"
    assert identity.checkpoint_path("/state/checkpoints", "wh", "g001") == "/state/checkpoints/wh/g001"
    assert identity.final_asset_uri("user_hourly") == "widehouse://final/user_hourly"
    assert identity.watermark_asset_uri("user_hourly") == "widehouse://watermark/user_hourly"
    assert identity.OFFLINE_DATABASE == "offline"


def test_airflow_run_reference() -> None:
    run = "manual__2026-11-20T09:00:00.123+00:00"
    assert identity.airflow_run_ref("widehouse_refinalize", run) == f"widehouse_refinalize/{run}"
    assert identity.parse_airflow_run(f"widehouse_refinalize/{run}") == ("widehouse_refinalize", run)
    assert identity.parse_airflow_run("d/a/b") == ("d", "a/b")  # a dag id has no '/'; a run id may
    for bad, part in [("no-run", "no-run"), ("/r", "dag id ''"), ("d/", "run id ''"), ("d d/r", "d d")]:
        with pytest.raises(ConfigError, match=re.escape(part)):
            identity.parse_airflow_run(bad)
    with pytest.raises(ConfigError, match="run id"):
        identity.airflow_run_ref("d", "line\nbreak")
    with pytest.raises(ConfigError, match="dag id"):
        identity.airflow_run_ref("d" * 251, "r")


def test_the_ledger_and_publications_record_the_airflow_run() -> None:
    for shape in (tables.LEDGER_SHAPE, tables.PUBLICATION_SHAPE):
        assert shape.names[-1] == "airflow_run"  # last: the column an older table gains at its end
        assert shape.column("airflow_run").kind == "string" and not shape.column("airflow_run").nullable


@pytest.mark.parametrize(
    ("pattern", "what"),
    [
        (r"""f["'][^"']*\{[\w.]*\bapp\}-\{""", "a group app id built by hand (use identity.group_app_id)"),
        (r"widehouse://(final|watermark)/\{", "an asset URI built by hand (use identity.*_asset_uri)"),
        (
            r"""(?<![!<>=])=\s*["']offline["']""",
            "the offline Hive database restated (use identity.OFFLINE_DATABASE)",
        ),
    ],
)
def test_identities_are_built_only_in_contracts_identity(pattern: str, what: str) -> None:
    home = LIBRARY / "contracts" / "identity.py"
    regex = re.compile(pattern)
    found = [
        f"{path}:{n}"
        for path, text in _sources(LIBRARY, DAGS).items()
        if path != home
        for n, line in enumerate(text.splitlines(), 1)
        if regex.search(line)
    ]
    assert found == [], what


def test_tables_collapsed_on_replay_fold_a_batch_written_twice_for_every_reader() -> None:
    """A table the stream writes without a sink mark must fold a replayed batch's rows into the first:
    its engine replaces rows of one key, the key holds the batch, and every query reading it says
    ``FINAL`` (in the library and in the analysts' SQL)."""
    assert set(tables.COLLAPSED_ON_REPLAY) == {"stream_counts"}
    shapes = {s.name: s for s in tables.STREAM_SHAPES}
    constants = {getattr(tables, n): n for n in tables.__all__ if isinstance(getattr(tables, n), str)}
    sql = {  # without the comments
        p: re.sub(r"--.*", "", p.read_text()) for p in sorted((LIBRARY.parents[1] / "sql").rglob("*.sql"))
    }
    sources = {**_sources(LIBRARY), **sql}
    unfinal = []
    for name in sorted(tables.COLLAPSED_ON_REPLAY):
        shape = shapes[name]
        assert shape.engine.startswith("ReplacingMergeTree")
        assert {"app", "group", "batch_id"} <= set(shape.order_by)
        read = re.compile(rf"\b(?:FROM|JOIN)\s+(?:\{{{constants[name]}\}}|`?{name}`?)(?!\s+FINAL\b)", re.I)
        for path, text in sources.items():
            unfinal += [f"{path.name}: {m.group(0)!r}" for m in read.finditer(text)]
    assert unfinal == []

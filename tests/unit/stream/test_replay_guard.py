"""The replay guard: a batch replayed under a changed catalog is refused; new batches are free to change.

Catalog changes are made the way a user makes them: by editing a copy of the catalog's YAML files.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.support import MemoryFiles, copy_catalog
from widehouse.catalog import Catalog, load_catalog
from widehouse.errors import CatalogError
from widehouse.stream.replay_guard import (
    KEEP_BATCHES,
    BatchRecord,
    CatalogChangedError,
    check_replay,
    drop_record,
    group_fingerprint,
    guard_replay,
    record_path,
)

ROOT = Path(__file__).parents[3]


@pytest.fixture
def schemas(tmp_path: Path) -> Path:
    return copy_catalog(tmp_path)


def _edit_topic(schemas: Path, local: str, edit: object) -> Catalog:
    path = next(schemas.glob(f"topics/**/{local}.yaml"))
    doc = yaml.safe_load(path.read_text())
    edit(doc)  # type: ignore[operator]
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return load_catalog(schemas)


def _login(catalog: Catalog) -> str:
    return next(str(t.name) for t in catalog.topics if t.name.local == "login")


def _other(catalog: Catalog) -> str:
    """Another topic than login (outside a login-only group)."""
    return next(str(t.name) for t in catalog.topics if t.name.local != "login")


def test_the_fingerprint_is_stable_and_ignores_topic_order(schemas: Path) -> None:
    catalog = load_catalog(schemas)
    topics = tuple(str(t.name) for t in catalog.topics[:5])
    assert group_fingerprint(catalog, topics) == group_fingerprint(load_catalog(schemas), topics[::-1])
    assert len(group_fingerprint(catalog, topics)) == 16


def test_a_mapping_change_of_a_group_topic_changes_the_fingerprint(schemas: Path) -> None:
    before = load_catalog(schemas)
    group = (_login(before),)

    def retarget(doc: dict) -> None:  # type: ignore[type-arg]
        doc["columns"]["user_hourly"]["logins"]["filter"] = "result = 'timeout'"

    after = _edit_topic(schemas, "login", retarget)
    assert group_fingerprint(before, group) != group_fingerprint(after, group)


def test_a_change_outside_the_group_keeps_the_fingerprint(schemas: Path) -> None:
    before = load_catalog(schemas)
    group = (_login(before),)
    other = before.topic(_other(before)).name.local

    def describe(doc: dict) -> None:  # type: ignore[type-arg]
        doc["fields"]["an_extra_field"] = {"type": "long"}

    after = _edit_topic(schemas, other, describe)
    assert before.fingerprint != after.fingerprint  # the catalog did change
    assert group_fingerprint(before, group) == group_fingerprint(after, group)


def test_an_unknown_topic_is_named() -> None:
    catalog = load_catalog(ROOT / "schemas")
    with pytest.raises(CatalogError, match="no/such"):
        group_fingerprint(catalog, ("persistent://no/such/topic",))


def test_a_new_batch_is_recorded_and_its_identical_replay_passes() -> None:
    files = MemoryFiles()
    record = BatchRecord("app", "g001", 7, "aaaa")
    guard_replay(files, "/cp/app/g001/", record)
    assert BatchRecord.from_json(files.files["/cp/app/g001/widehouse/catalog/7.json"], "x") == record
    guard_replay(files, "/cp/app/g001", record)  # the replay with the same catalog
    assert list(files.files) == ["/cp/app/g001/widehouse/catalog/7.json"]


def test_a_replay_under_another_catalog_is_refused_naming_everything() -> None:
    files = MemoryFiles()
    guard_replay(files, "/cp", BatchRecord("app1", "g003", 4, "1111aaaa"))
    with pytest.raises(CatalogChangedError) as refused:
        guard_replay(files, "/cp", BatchRecord("app1", "g003", 4, "2222bbbb"))
    message = str(refused.value)
    for part in (
        "g003",
        "app1",
        "batch 4",
        "1111aaaa",
        "2222bbbb",
        "restore the catalog",
        "WIDEHOUSE_STREAM_APP",
    ):
        assert part in message, part
    # the record still holds the catalog the batch was first written with: restoring it passes
    guard_replay(files, "/cp", BatchRecord("app1", "g003", 4, "1111aaaa"))


def test_the_guard_says_whether_it_recorded_and_a_dropped_record_lets_another_catalog_replay() -> None:
    files = MemoryFiles()
    assert guard_replay(files, "/cp", BatchRecord("a", "g", 3, "old")) is True  # new: recorded
    assert guard_replay(files, "/cp", BatchRecord("a", "g", 3, "old")) is False  # its replay
    drop_record(files, "/cp", 3)
    assert files.files == {}
    # nothing was written with "old" (the batch failed before its sinks): another catalog may replay it
    assert guard_replay(files, "/cp", BatchRecord("a", "g", 3, "new")) is True
    with pytest.raises(CatalogChangedError):
        guard_replay(files, "/cp", BatchRecord("a", "g", 3, "old"))


def test_the_next_batch_may_use_a_changed_catalog() -> None:
    files = MemoryFiles()
    guard_replay(files, "/cp", BatchRecord("a", "g", 4, "old"))
    guard_replay(files, "/cp", BatchRecord("a", "g", 5, "new"))
    check_replay(None, BatchRecord("a", "g", 6, "newer"))


def test_old_records_are_pruned() -> None:
    files = MemoryFiles()
    for batch in range(KEEP_BATCHES + 3):
        guard_replay(files, "/cp", BatchRecord("a", "g", batch, "f"))
    kept = sorted(int(Path(p).stem) for p in files.files)
    assert kept == list(range(3, KEEP_BATCHES + 3))


def test_a_torn_record_is_an_error_naming_the_file() -> None:
    files = MemoryFiles()
    files.write(record_path("/cp", 2), '{"app": "a", "gro')
    with pytest.raises(CatalogError, match=r"/cp/widehouse/catalog/2\.json"):
        guard_replay(files, "/cp", BatchRecord("a", "g", 2, "f"))

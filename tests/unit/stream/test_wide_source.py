"""The stream's own source format (widehouse.stream.spark.source): its name and how Spark ships it."""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from pyspark import cloudpickle  # what Spark pickles commands and data sources with

from widehouse.catalog import load_catalog
from widehouse.stream.plan import TransformPlan
from widehouse.stream.spark.source import PACKED_DDL, WideStreamReader, wide_source, wide_source_name

SCHEMAS = Path(__file__).resolve().parents[3] / "schemas"


def _plan(topics: int = 3, **kwargs: object) -> TransformPlan:
    catalog = load_catalog(SCHEMAS)
    return TransformPlan.for_topics(catalog, [str(t.name) for t in catalog.topics[:topics]], **kwargs)  # type: ignore[arg-type]


def test_the_name_is_stable_and_changes_with_the_plan() -> None:
    plan = _plan()
    name = wide_source_name("app-1", "g001", plan)
    assert name == wide_source_name("app-1", "g001", _plan())
    assert name.startswith("widehouse_wide_app_1_g001_") and name.replace("_", "").isalnum()
    assert wide_source_name("app-1", "g002", plan) != name
    assert wide_source_name("app-1", "g001", _plan(payload_limit=10)) != name
    relocated = TransformPlan(plan.catalog.relocated("x1"), plan.tables)
    assert wide_source_name("app-1", "g001", relocated) != name
    fewer = TransformPlan(plan.catalog, plan.tables[:1])
    assert wide_source_name("app-1", "g001", fewer) != name


def test_the_class_travels_by_value_with_its_plan(tmp_path: Path) -> None:
    """Spark pickles a registered data source with cloudpickle into processes that never saw it."""
    plan = _plan()
    cls = wide_source("widehouse_wide_x", plan)
    blob = tmp_path / "source.pkl"
    blob.write_bytes(cloudpickle.dumps(cls))
    check = textwrap.dedent(
        f"""
        import pickle, sys
        cls = pickle.loads(open({str(blob)!r}, "rb").read())
        assert cls.name() == "widehouse_wide_x", cls.name()
        source = cls({{}})
        assert source.schema() == {PACKED_DDL!r}
        print(cls.__module__, cls.__qualname__)
        """
    )
    out = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True)
    assert "WideDataSource" in out.stdout


def test_the_processes_it_travels_to_import_no_loader_and_no_event_loop(tmp_path: Path) -> None:
    """The class arrives with its plan already parsed, and those processes send no pipelined admin
    requests: Spark's planner and task processes import neither the catalog's YAML loader (nor
    YAML) nor asyncio with ssl (~30 and ~20-40 ms of each such process's start, measured)."""
    blob = tmp_path / "source.pkl"
    blob.write_bytes(cloudpickle.dumps(wide_source("widehouse_wide_x", _plan())))
    check = textwrap.dedent(
        f"""
        import pickle, sys
        import widehouse.stream.transform
        cls = pickle.loads(open({str(blob)!r}, "rb").read())
        cls({{}}).schema()
        heavy = ("yaml", "widehouse.catalog.loader", "asyncio", "ssl")
        print(sorted(m for m in sys.modules if m in heavy))
        """
    )
    out = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_create_data_source_process_imports_no_pyarrow(tmp_path: Path) -> None:
    """Spark's ``create_data_source`` process unpickles the group's source only to ask its schema.
    pyspark's own module for it imports no pyarrow, and neither may the source and its plan: that
    was ~65 ms of each group's ``readStream...load()``, the start-up's path (measured: the
    unpickling went from 155-220 ms to 81-94 ms of CPU)."""
    blob = tmp_path / "source.pkl"
    blob.write_bytes(cloudpickle.dumps(wide_source("widehouse_wide_x", _plan())))
    check = textwrap.dedent(
        f"""
        import pickle, sys
        import pyspark.daemon, pyspark.sql.worker.create_data_source
        assert "pyarrow" not in sys.modules  # else this test proves nothing
        cls = pickle.loads(open({str(blob)!r}, "rb").read())
        assert cls({{}}).schema() == {PACKED_DDL!r}
        print(sorted(m for m in sys.modules if m.split(".")[0] in ("pyarrow", "numpy", "pandas")))
        """
    )
    out = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_planner_processes_build_no_catalog_and_pass_the_plan_on_as_it_came(tmp_path: Path) -> None:
    """Spark's planners (``create_data_source``, ``plan_data_source_read``, each query's source
    runner) unpickle the group's source and pickle it, or its reader, on. They never read the plan:
    they import neither the catalog nor the fast path for it, and build no catalog (~30-35 ms of
    imports a process, and a 1,000-topic catalog's objects ~40 ms more, measured), and what they
    pass on holds the very bytes they got, so the tasks find the warm-up's plan."""
    plan = _plan()
    blob = tmp_path / "source.pkl"
    blob.write_bytes(cloudpickle.dumps(wide_source("widehouse_wide_x", plan)))
    check = textwrap.dedent(
        f"""
        import pickle, sys
        from pyspark import cloudpickle
        import widehouse.source.spark  # the ``pulsar`` source: what a planner needs anyway
        cls = pickle.loads(open({str(blob)!r}, "rb").read())
        assert cls({{}}).schema() == {PACKED_DDL!r}
        plan = cls.streamReader.__closure__  # the plan the class carries
        (shipped,) = [c.cell_contents for c in plan if type(c.cell_contents).__name__ == "TransformPlan"]
        again = cloudpickle.dumps(shipped)
        assert "catalog" not in vars(shipped)
        unused = ("widehouse.catalog", "widehouse.stream.fastpath")
        print(sorted(m for m in sys.modules if m.startswith(unused)))
        sys.stdout.buffer.write(again)
        """
    )
    out = subprocess.run([sys.executable, "-c", check], capture_output=True, check=True)
    imported, _, again = out.stdout.partition(b"\n")
    assert imported == b"[]"
    assert again == cloudpickle.dumps(pickle.loads(cloudpickle.dumps(plan)))  # the bytes as shipped


def test_the_reading_task_skips_the_metadata_the_transform_does_not_read(monkeypatch: Any) -> None:
    from widehouse.pulsar.positions import Mark
    from widehouse.settings import load_settings
    from widehouse.source.options import parse_options
    from widehouse.source.planning import ReadTask, Slice
    from widehouse.source.spark import PulsarInputPartition
    from widehouse.stream.spark import source

    seen = []
    monkeypatch.setattr(source, "read_messages", lambda task, config: seen.append(config) or iter(()))
    settings = load_settings({})
    options = parse_options({"topics": "persistent://t/n/a", "appId": "x"}, settings.pulsar)
    piece = Slice("persistent://t/n/a", -1, Mark(None, -1), Mark(None, -1))
    partition = PulsarInputPartition(ReadTask((piece,)))
    assert list(WideStreamReader(options, _plan()).read(partition)) == []
    assert seen and seen[0].metadata is False and options.read_config.metadata is True

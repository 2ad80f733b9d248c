"""What the stream's warm-up leaves in a Python worker (:mod:`widehouse.stream.spark.warmup`): the
first reading task that worker runs imports nothing more, and a group's plan, however Spark's
planner processes passed it on, finds the handler templates the warm-up made.

Spark runs these in its Python workers; here a fresh interpreter stands in for one (what a process
has imported is the point), and the plans travel as Spark ships them: pickled, and pickled again by
a process that unpickled them."""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.fake_pulsar import message_chunks
from widehouse.catalog import load_catalog
from widehouse.stream.plan import TransformPlan
from widehouse.testing import generated_source_batch

ROOT = Path(__file__).parents[3]


def _run(code: str, *args: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return out.stdout.strip()


def test_a_warmed_workers_first_reading_task_imports_nothing(tmp_path: Path) -> None:
    """Its first batch's output imported pandas (pyarrow does on its first array of Python values)
    and ``pyarrow.compute``: ~0.25-0.3 core-s a worker on the first batch's critical path, measured.
    The warm-up imports them while the driver plans."""
    catalog = load_catalog(ROOT / "schemas")
    topics = [str(t.name) for t in catalog.topics]
    plan = TransformPlan.for_topics(catalog, topics)
    batch = generated_source_batch(catalog, 2_000, users=50, late_rate=0.01)
    chunks, _messages = message_chunks(batch, 500, 7)
    shipped = tmp_path / "task.pkl"
    shipped.write_bytes(pickle.dumps((plan, topics, chunks)))
    imported = _run(
        """
        import pickle, sys
        from widehouse.stream.spark.warmup import _readers
        plan, topics, chunks = pickle.loads(open(sys.argv[1], "rb").read())
        list(_readers(plan, topics)(iter([])))
        before = set(sys.modules)
        from widehouse.stream.transform import transform_packed
        batches = list(transform_packed(chunks, plan))
        assert batches and sum(b.num_rows for b in batches) > 0
        print(sorted(set(sys.modules) - before))
        """,
        str(shipped),
    )
    assert imported == "[]"


def _many_topics_catalog(root: Path, topics: int) -> Path:
    """Topics in a namespace of one letter (``bench/t``): the catalog of the 1,000-topic benchmark,
    whose plan an unpickling process pickles to other bytes than the driver did."""
    schemas = root / "schemas"
    (schemas / "tables").mkdir(parents=True)
    (schemas / "catalog.yaml").write_text(
        "name: many\nevent_time: {lateness: 1h, max_future: 5m, max_age: 7d}\n"
    )
    (schemas / "tables" / "clicks.yaml").write_text(
        "wide_table: clicks\ngrain: hour\nkey: {name: uid, type: long}\ncolumns:\n"
        "  - {name: events}\n  - {name: amount}\n"
    )
    folder = schemas / "topics" / "bench" / "t"
    folder.mkdir(parents=True)
    for i in range(topics):
        (folder / f"t{i}.yaml").write_text(
            f"topic: persistent://bench/t/t{i}\nkey: uid\nevent_time: ts\n"
            "fields:\n  uid: long\n  ts: timestamp-ms\n  amount: {type: double, range: [0, 100]}\n"
            "columns:\n  clicks:\n    events: count\n    amount: sum(amount)\n"
        )
    return schemas


def test_a_plan_passed_on_by_a_planner_process_finds_the_warm_ups_templates(tmp_path: Path) -> None:
    """The driver ships the warm-up's plan and the group's (equal plans, made apart); Spark's planner
    processes unpickle the group's source and pickle it again for its tasks. In the worker both must
    be one plan, so the templates the warm-up made serve the group's tasks."""
    catalog = load_catalog(_many_topics_catalog(tmp_path, 3))
    topics = [str(t.name) for t in catalog.topics]
    warm = tmp_path / "warm.pkl"
    warm.write_bytes(pickle.dumps(TransformPlan.for_topics(catalog, topics)))
    group = tmp_path / "group.pkl"
    group.write_bytes(pickle.dumps(TransformPlan.for_topics(catalog, topics)))
    passed_on = tmp_path / "passed-on.pkl"
    _run(  # a planner process: unpickles the source, pickles it again
        """
        import pickle, sys
        plan = pickle.loads(open(sys.argv[1], "rb").read())
        open(sys.argv[2], "wb").write(pickle.dumps(plan))
        """,
        str(group),
        str(passed_on),
    )
    assert passed_on.read_bytes() == group.read_bytes()
    shared = _run(  # a worker: warmed with the one, then a task of the other
        """
        import pickle, sys
        from widehouse.stream.plan import prepared
        from widehouse.stream.transform import compile_handlers
        warm = pickle.loads(open(sys.argv[1], "rb").read())
        compile_handlers(warm, [str(t.name) for t in warm.catalog.topics])
        task = pickle.loads(open(sys.argv[2], "rb").read())
        print(task is warm, len(prepared(task).templates))
        """,
        str(warm),
        str(passed_on),
    )
    assert shared == "True 3"

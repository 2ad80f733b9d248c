"""The transform over the read loop's chunks (widehouse.source.messages.Messages), as the stream's
reading tasks run it: quarantined and late rows keep their exact message ids, and no other message
is asked for its id (taking one costs more than reading the payload)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tests.fake_pulsar import id_calls, message_chunks, partition_of
from widehouse.catalog import Accepted, Catalog, load_catalog
from widehouse.stream.output import output_schema
from widehouse.stream.plan import TransformPlan
from widehouse.stream.transform import transform
from widehouse.testing import generated_source_batch, reference_verdicts

ROOT = Path(__file__).parents[3]
LEDGER = 7


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog(ROOT / "schemas")


@pytest.fixture(scope="module")
def batch(catalog: Catalog) -> pa.RecordBatch:
    """6k generated messages (1% bad of every class, 1% late) as the Pulsar source emits them."""
    return generated_source_batch(catalog, 6_000, users=200, late_rate=0.01)


def _side_rows(out: pa.Table) -> set[tuple[str, str, str | None, int]]:
    sides = out.filter(pc.is_in(out["wh_kind"], pa.array(["quarantine", "late"])))
    publish = sides["wh_publish_time"].cast(pa.int64()).to_pylist()
    return {
        (r["wh_message_id"], r["wh_kind"], r["wh_reason"], p)
        for r, p in zip(
            sides.select(["wh_message_id", "wh_kind", "wh_reason"]).to_pylist(), publish, strict=True
        )
    }


def test_side_rows_keep_their_exact_ids_and_no_other_id_is_taken(
    catalog: Catalog, batch: pa.RecordBatch
) -> None:
    plan = TransformPlan(catalog, tuple(t.name for t in catalog.wide_tables))
    chunks, messages = message_chunks(batch, 1000, LEDGER)
    out = pa.Table.from_batches(list(transform(chunks, plan)), schema=output_schema(plan))

    expected: set[tuple[str, str, str | None, int]] = set()
    for i, (topic, _payload, publish, verdict) in enumerate(reference_verdicts(catalog, batch)):
        message_id = f"{LEDGER}:{i}:{partition_of(topic)}:-1"
        publish_us = round(publish.timestamp() * 1000) * 1000
        if not isinstance(verdict, Accepted):
            expected.add((message_id, "quarantine", verdict.reason, publish_us))
        elif verdict.late:
            expected.add((message_id, "late", None, publish_us))
    kinds = {kind for _id, kind, _reason, _publish in expected}
    assert kinds == {"quarantine", "late"}  # the data has both
    assert _side_rows(out) == expected
    # exactly the side rows' messages were asked for their id, once each
    side_positions = {(LEDGER, int(message_id.split(":")[1]), -1): 1 for message_id, *_ in expected}
    assert id_calls(messages) == side_positions

    stats = out.filter(pc.equal(out["wh_kind"], "stats")).to_pylist()
    assert sum(s["wh_rows_in"] for s in stats) == batch.num_rows
    assert sum(s["wh_bad"] for s in stats) == sum(1 for e in expected if e[1] == "quarantine")
    assert sum(s["wh_late"] for s in stats) == sum(1 for e in expected if e[1] == "late")


def test_chunks_fold_to_the_same_partials_as_the_sources_arrow_rows(
    catalog: Catalog, batch: pa.RecordBatch
) -> None:
    """The Arrow path is checked against the reference rows (test_transform.py); the chunks' path
    must fold the same messages to the same partial rows."""
    plan = TransformPlan(catalog, tuple(t.name for t in catalog.wide_tables))
    chunks, _messages = message_chunks(batch, 777, LEDGER)
    of_chunks = pa.Table.from_batches(list(transform(chunks, plan)), schema=output_schema(plan))
    of_arrow = pa.Table.from_batches(list(transform([batch], plan)), schema=output_schema(plan))

    def partials(out: pa.Table) -> list[dict[str, object]]:
        rows = out.filter(pc.equal(out["wh_kind"], "partial")).to_pylist()
        return sorted(rows, key=repr)

    assert partials(of_chunks) == partials(of_arrow) != []


def test_chunks_in_runs_of_a_topic_fold_to_the_same_output_as_the_sources_arrow_rows(
    catalog: Catalog, batch: pa.RecordBatch
) -> None:
    """As a read task reads: each partition's messages in one stretch, so the fold takes a run of
    one topic at a time (the hour's counters once a run). Everything it yields (partials, stats,
    quarantine and late rows but their ids) equals the Arrow path's row-at-a-time fold."""
    import json

    from widehouse.stream import transform as transform_module

    by_topic = batch.take(pc.sort_indices(batch, [("__topic", "ascending")]))
    plan = TransformPlan(catalog, tuple(t.name for t in catalog.wide_tables))
    chunks, _messages = message_chunks(by_topic, 777, LEDGER)
    assert all(len(c.runs) * transform_module._RUN_ROWS <= len(c) for c in chunks)  # the runs' path
    of_chunks = pa.Table.from_batches(list(transform(chunks, plan)), schema=output_schema(plan))
    of_arrow = pa.Table.from_batches(list(transform([by_topic], plan)), schema=output_schema(plan))

    def canonical(out: pa.Table) -> list[str]:
        rows = out.drop_columns(["wh_message_id"]).to_pylist()
        return sorted(json.dumps(r, sort_keys=True, default=str) for r in rows)

    assert canonical(of_chunks) == canonical(of_arrow)
    kinds = set(of_chunks["wh_kind"].to_pylist())
    assert kinds == {"partial", "stats", "quarantine", "late"}

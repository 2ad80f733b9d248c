"""The stream's per-batch transform against the catalog's reference semantics (pure Arrow, no Spark)."""

from __future__ import annotations

import pickle
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from widehouse.catalog import DAY_MS, HOUR_MS, Accepted, Catalog, load_catalog, parse_event
from widehouse.errors import CatalogError
from widehouse.generator.core import TrafficGenerator
from widehouse.generator.manifest import diff_rows
from widehouse.generator.options import GenerateOptions
from widehouse.stream.transform import TransformPlan, output_schema, reference_rows, transform

ROOT = Path(__file__).parents[3]


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog(ROOT / "schemas")


@pytest.fixture(scope="module")
def batch(catalog: Catalog) -> pa.RecordBatch:
    """12k generated messages (1% bad of every class, 0.5% late) as the Pulsar source emits them."""
    base = (int(time.time() * 1000) // HOUR_MS - 3) * HOUR_MS
    generator = TrafficGenerator(
        catalog,
        GenerateOptions(count=12_000, rate=0, base_time_ms=base, bad_rate=0.01, late_rate=0.005, users=300),
    )
    values, topics, ids, publish = [], [], [], []
    for chunk in generator.chunks():
        for t, payload, offset in zip(chunk.topics, chunk.payloads, chunk.offsets_ms, strict=True):
            values.append(payload)
            topics.append(str(catalog.topics[t].name))
            ids.append(f"{len(ids)}:0:0")
            publish.append((base + offset + 1_500) * 1000)
    return pa.RecordBatch.from_pydict(
        {
            "value": pa.array(values, pa.binary()),
            "__topic": topics,
            "__messageId": ids,
            "__publishTime": pa.array(publish, pa.timestamp("us", tz="UTC")),
        }
    )


def run(plan: TransformPlan, batch: pa.RecordBatch, partitions: int) -> pa.Table:
    """Run the transform as Spark would: one call per input partition, outputs concatenated."""
    size = -(-batch.num_rows // partitions)
    outputs = []
    for i in range(partitions):
        part = batch.slice(i * size, size)
        pieces = [part.slice(j, 1000) for j in range(0, part.num_rows, 1000)]
        outputs += list(transform(iter(pieces), plan))
    return pa.Table.from_batches(outputs, schema=output_schema(plan))


def merged(plan: TransformPlan, out: pa.Table, table: str) -> dict[tuple[Any, int], dict[str, Any]]:
    """Merge partial rows (per key and hour, from several partitions) the way the sinks do."""
    wide = plan.catalog.table(table)
    prefix = plan.prefix(table)
    mask = pc.and_(pc.equal(out["wh_kind"], "partial"), pc.equal(out["wh_table"], table))
    period_ms = HOUR_MS if wide.grain == "hour" else DAY_MS
    result: dict[tuple[Any, int], dict[str, Any]] = {}
    for row in out.filter(mask).to_pylist():
        hour_ms = round(row[f"{prefix}hour"].timestamp() * 1000)
        key = (row[f"{prefix}{wide.key_name}"], hour_ms - hour_ms % period_ms)
        acc = result.setdefault(key, {})
        for column in wide.columns:
            value = row[f"{prefix}{column.name}"]
            if column.is_pair and value is not None:
                value = (value["ts"], value["v"])
            current = acc.get(column.name)
            if current is None:
                acc[column.name] = value
            elif value is not None:
                merge = column.merge_function
                acc[column.name] = (
                    current + value if merge == "sum" else (min if merge == "min" else max)(current, value)
                )
    for values in result.values():
        for column in wide.columns:
            if column.is_pair and values.get(column.name) is not None:
                values[column.name] = values[column.name][1]
    return result


@pytest.mark.parametrize("partitions", [1, 3])
def test_partials_merge_to_the_reference_rows(
    catalog: Catalog, batch: pa.RecordBatch, partitions: int
) -> None:
    plan = TransformPlan(catalog, tuple(t.name for t in catalog.wide_tables))
    out = run(plan, batch, partitions)
    expected = reference_rows(catalog, batch)
    for table in plan.tables:
        assert diff_rows(expected[table], merged(plan, out, table)) == [], table


def test_every_message_is_accounted_for_once(catalog: Catalog, batch: pa.RecordBatch) -> None:
    plan = TransformPlan(catalog, tuple(t.name for t in catalog.wide_tables))
    out = run(plan, batch, 2)
    kinds = Counter(out["wh_kind"].to_pylist())
    stats = out.filter(pc.equal(out["wh_kind"], "stats")).to_pylist()
    assert sum(s["wh_rows_in"] for s in stats) == batch.num_rows
    assert sum(s["wh_good"] + s["wh_bad"] + s["wh_late"] for s in stats) == batch.num_rows
    assert sum(s["wh_bad"] for s in stats) == kinds["quarantine"] > 0
    assert sum(s["wh_late"] for s in stats) == kinds["late"] > 0
    # quarantine reasons are exactly the reference parser's
    quarantined = out.filter(pc.equal(out["wh_kind"], "quarantine")).to_pylist()
    by_id = {
        m: (p, t, pub)
        for m, p, t, pub in zip(
            batch["__messageId"].to_pylist(),
            batch["value"].to_pylist(),
            batch["__topic"].to_pylist(),
            batch["__publishTime"].to_pylist(),
            strict=True,
        )
    }
    for row in quarantined:
        payload, topic, publish = by_id[row["wh_message_id"]]
        verdict = parse_event(
            catalog.topic(topic),
            payload,
            round(publish.timestamp() * 1000),
            catalog.rules,
            catalog.max_payload_bytes,
        )
        assert not isinstance(verdict, Accepted)
        assert row["wh_reason"] == verdict.reason
        assert row["wh_payload_bytes"] == len(payload)
        assert row["wh_payload"] == payload[: plan.payload_limit]
        assert row["wh_publish_time"] == publish


def test_unknown_topic_is_quarantined_not_dropped(catalog: Catalog) -> None:
    plan = TransformPlan(catalog, ("user_hourly",))
    batch = pa.RecordBatch.from_pydict(
        {
            "value": pa.array([b'{"uid": 1}'], pa.binary()),
            "__topic": ["persistent://nobody/knows/this"],
            "__messageId": ["1:2:3"],
            "__publishTime": pa.array([1_700_000_000_000_000], pa.timestamp("us", tz="UTC")),
        }
    )
    out = pa.Table.from_batches(list(transform(iter([batch]), plan)), schema=output_schema(plan))
    rows = out.filter(pc.equal(out["wh_kind"], "quarantine")).to_pylist()
    assert [(r["wh_topic"], r["wh_reason"], r["wh_payload"]) for r in rows] == [
        ("persistent://nobody/knows/this", "unknown_topic", b'{"uid": 1}')
    ]


def test_plan_is_picklable_and_names_unknown_topics(catalog: Catalog) -> None:
    topics = [str(t.name) for t in catalog.topics[:3]]
    plan = TransformPlan.for_topics(catalog, topics)
    assert pickle.loads(pickle.dumps(plan)).tables == plan.tables
    with pytest.raises(CatalogError, match="topics not in the catalog: persistent://x/y/z"):
        TransformPlan.for_topics(catalog, [*topics, "persistent://x/y/z"])


@pytest.mark.parametrize("partitions", [1, 4])
def test_arrow_merge_equals_the_reference(catalog: Catalog, batch: pa.RecordBatch, partitions: int) -> None:
    from widehouse.stream.merge import partials

    plan = TransformPlan(catalog, tuple(t.name for t in catalog.wide_tables))
    out = run(plan, batch, partitions)
    expected = reference_rows(catalog, batch)
    for name in plan.tables:
        merged_rows = partials(out, plan, name)
        wide = catalog.table(name)
        keys = list(zip(merged_rows[wide.key_name].to_pylist(), merged_rows["hour"].to_pylist(), strict=True))
        assert keys == sorted(keys), "rows are sorted by (key, hour)"
        assert len(set(keys)) == len(keys), "one row per (key, hour)"
        rows = {}
        for row in merged_rows.to_pylist():
            hour_ms = round(row["hour"].timestamp() * 1000)
            period = hour_ms - hour_ms % (HOUR_MS if wide.grain == "hour" else DAY_MS)
            values = {
                c.name: row[c.name]["v"] if c.is_pair and row[c.name] else row[c.name] for c in wide.columns
            }
            if (row[wide.key_name], period) in rows:  # a day table: hours of one day, merged like the sinks
                continue
            rows[(row[wide.key_name], period)] = values
        if wide.grain == "hour":
            assert diff_rows(expected[name], rows) == [], name
        else:
            assert set(rows) == set(expected[name]), name


def test_hour_counts_split_by_publish_hour_and_summed_over_partitions(catalog: Catalog) -> None:
    """Hand-made: 3 unknown-topic messages in hour 10, 2 in hour 11, 1 unparseable message of a
    catalog topic in hour 11; read as 2 input partitions."""
    from widehouse.stream.merge import hour_counts

    known = str(catalog.topics[0].name)
    unknown = "persistent://nobody/knows/this"
    h10 = 1_700_000_000_000 - 1_700_000_000_000 % HOUR_MS
    h11 = h10 + HOUR_MS
    messages = [
        (unknown, h10 + 1),
        (unknown, h10 + 2),
        (unknown, h11 - 1),
        (unknown, h11),
        (unknown, h11 + 5),
        (known, h11 + 7),
    ]
    batch = pa.RecordBatch.from_pydict(
        {
            "value": pa.array([b"{not json"] * len(messages), pa.binary()),
            "__topic": [t for t, _ in messages],
            "__messageId": [f"{i}:0:0" for i in range(len(messages))],
            "__publishTime": pa.array([ms * 1000 for _, ms in messages], pa.timestamp("us", tz="UTC")),
        }
    )
    plan = TransformPlan(catalog, ("user_hourly",))
    out = run(plan, batch, partitions=2)
    rows = hour_counts(out, "app", "g1", 7).to_pylist()
    got = [
        (r["topic"], int(r["publish_hour"].timestamp() * 1000), r["rows_in"], r["rows_out"], r["bad"])
        for r in rows
    ]
    assert sorted(got) == sorted([(unknown, h10, 3, 0, 3), (unknown, h11, 2, 0, 2), (known, h11, 1, 0, 1)])
    assert {(r["app"], r["group"], r["batch_id"]) for r in rows} == {("app", "g1", 7)}


def test_the_packed_output_unpacks_to_the_same_rows(catalog: Catalog, batch: pa.RecordBatch) -> None:
    """What the stream ships through Spark (IPC bytes per output batch) is the tagged output, exactly."""
    from widehouse.stream.transform import PACKED_SCHEMA, transform_packed, unpack

    plan = TransformPlan.for_topics(catalog, sorted(set(batch.column("__topic").to_pylist())))
    pieces = [batch.slice(j, 1000) for j in range(0, batch.num_rows, 1000)]
    packed = pa.Table.from_batches(list(transform_packed(iter(pieces), plan)), schema=PACKED_SCHEMA)
    assert packed.num_rows > 1  # more than one output batch: every cell is read back
    plain = pa.Table.from_batches(list(transform(iter(pieces), plan)), schema=output_schema(plan))
    assert unpack(packed, plan).equals(plain)
    assert unpack(packed.slice(0, 0), plan).schema == output_schema(plan)

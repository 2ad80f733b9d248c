"""The stream's per-batch transform against the catalog's reference semantics (pure Arrow, no Spark)."""

from __future__ import annotations

import json
import pickle
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from widehouse.catalog import Accepted, Catalog, load_catalog
from widehouse.contracts.periods import DAY_MS, HOUR_MS
from widehouse.errors import CatalogError
from widehouse.generator.manifest import diff_rows
from widehouse.stream.output import output_schema
from widehouse.stream.plan import TransformPlan
from widehouse.stream.transform import transform
from widehouse.testing import generated_source_batch, reference_rows, reference_verdicts

ROOT = Path(__file__).parents[3]


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog(ROOT / "schemas")


@pytest.fixture(scope="module")
def batch(catalog: Catalog) -> pa.RecordBatch:
    """12k generated messages (1% bad of every class, 0.5% late) as the Pulsar source emits them."""
    return generated_source_batch(catalog, 12_000, users=300, late_rate=0.005)


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
        m: (payload, publish, verdict)
        for m, (_, payload, publish, verdict) in zip(
            batch["__messageId"].to_pylist(), reference_verdicts(catalog, batch), strict=True
        )
    }
    for row in quarantined:
        payload, publish, verdict = by_id[row["wh_message_id"]]
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


def test_a_shipped_plan_is_built_once_per_process_and_anew_when_it_changed(catalog: Catalog) -> None:
    """Spark ships a group's plan with every reading task: a worker builds its objects once."""
    topics = [str(t.name) for t in catalog.topics]
    plan = TransformPlan.for_topics(catalog, topics[:3])
    shipped = pickle.dumps(plan)
    first = pickle.loads(shipped)
    assert first is not plan and first.tables == plan.tables and first.catalog.topics == catalog.topics
    assert pickle.loads(shipped) is first  # the same bytes again: not built again
    assert pickle.loads(pickle.dumps(plan)) is first
    other = pickle.loads(pickle.dumps(TransformPlan(catalog, plan.tables[:1])))
    assert other is not first and other.tables == plan.tables[:1]
    slower = pickle.loads(pickle.dumps(TransformPlan(catalog, plan.tables, fast_path=False)))
    assert slower is not first and not slower.fast_path


def test_a_shipped_plans_catalog_is_built_on_first_use_and_equals_the_original(catalog: Catalog) -> None:
    """Spark's planner processes unpickle a group's plan only to pass it on: a shipped plan holds its
    catalog's bytes until something reads ``catalog``, and then is the plan it was."""
    plan = TransformPlan.for_topics(catalog, [str(t.name) for t in catalog.topics[:4]], payload_limit=99)
    shipped = pickle.loads(pickle.dumps(TransformPlan(catalog, plan.tables, 99, fast_path=False)))
    assert "catalog" not in vars(shipped)  # not built yet
    assert (shipped.tables, shipped.payload_limit, shipped.fast_path) == (plan.tables, 99, False)
    passed_on = pickle.dumps(shipped)  # passing it on builds nothing either
    assert "catalog" not in vars(shipped) and pickle.loads(passed_on) is shipped
    assert shipped.catalog.fingerprint == catalog.fingerprint  # built here, once
    assert shipped.catalog is shipped.catalog and "catalog" in vars(shipped)  # built once, kept
    assert shipped == TransformPlan(catalog, plan.tables, 99, fast_path=False)
    assert pickle.dumps(shipped) == passed_on  # still ships the bytes it came as
    with pytest.raises(AttributeError, match="no_such"):
        _ = shipped.no_such  # type: ignore[attr-defined]


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


def test_the_packed_output_crosses_spark_compressed(catalog: Catalog, batch: pa.RecordBatch) -> None:
    """The sparse wide output is shipped with compressed buffers: a fraction of its plain IPC size."""
    from widehouse.stream.transform import transform_packed

    plan = TransformPlan.for_topics(catalog, sorted(set(batch.column("__topic").to_pylist())))
    packed = list(transform_packed(iter([batch]), plan))
    plain = list(transform(iter([batch]), plan))
    assert len(packed) == len(plain)
    for cell, rows in zip(packed, plain, strict=True):
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, rows.schema) as writer:
            writer.write_batch(rows)
        shipped = cell.column(0)[0].as_buffer().size
        assert shipped * 4 < sink.getvalue().size, (shipped, sink.getvalue().size)


def test_handlers_compiled_ahead_with_the_apps_plan_serve_each_groups_tasks(
    catalog: Catalog, batch: pa.RecordBatch
) -> None:
    """What the stream's warm-up compiles (every topic of the app, under one plan holding all their
    tables) is what each group's tasks look up (under the group's own, smaller plan): they compile
    nothing more."""
    from widehouse.stream import fastpath
    from widehouse.stream.transform import compile_handlers

    topics = sorted(set(batch.column("__topic").to_pylist()))
    fastpath._CODE.clear()
    compiled = compile_handlers(TransformPlan.for_topics(catalog, topics), topics)
    cached = set(fastpath._CODE)
    assert compiled == len(topics) and 0 < len(cached) <= len(topics)  # every demo topic has a fast path
    names = {code.co_filename for code in fastpath._CODE.values()}
    assert names <= {f"<widehouse fast path: {t}>" for t in topics}
    for group in (topics[::2], topics[1::2]):
        rows = batch.filter(pc.is_in(batch.column("__topic"), pa.array(group)))
        assert rows.num_rows > 0
        list(transform(iter([rows]), TransformPlan.for_topics(catalog, group)))
        assert set(fastpath._CODE) == cached  # found, not compiled again


def test_a_plans_later_tasks_bind_its_handlers_without_making_them_again(
    catalog: Catalog, batch: pa.RecordBatch, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plan's first task in a process makes each topic's handler template and column rules; its
    later tasks only bind them to their own rows (each task still folds into its own state: three
    tasks of one plan merge to the reference rows, test above). A plan built anew makes them anew."""
    from widehouse.catalog.semantics import fold
    from widehouse.stream import fastpath

    made: list[str] = []
    rules: list[str] = []
    real_template, real_rules = fastpath.handler_template, fold.compile_rules

    def template(topic: Any, *rest: Any) -> Any:
        made.append(str(topic.name))
        return real_template(topic, *rest)

    def column_rules(topic: Any, table: Any) -> Any:
        rules.append(str(topic.name))
        return real_rules(topic, table)

    monkeypatch.setattr(fastpath, "handler_template", template)  # the plan imports both where it uses them
    monkeypatch.setattr(fold, "compile_rules", column_rules)
    topics = sorted(set(batch.column("__topic").to_pylist()))
    plan = TransformPlan.for_topics(catalog, topics)
    halves = (batch.slice(0, batch.num_rows // 2), batch.slice(batch.num_rows // 2))
    list(transform(iter([halves[0]]), plan))
    assert sorted(made) == topics  # one template per topic met, every demo topic has a fast path
    assert set(rules) == set(topics)
    first_made, first_rules = len(made), len(rules)
    list(transform(iter([halves[1]]), plan))
    assert (len(made), len(rules)) == (first_made, first_rules)
    list(transform(iter([halves[1]]), TransformPlan.for_topics(catalog, topics)))
    assert len(made) == 2 * first_made


# --- the per-event error boundary (hardening issue, item 1) ---------------------------------------
PURCHASE = "persistent://bigolive/commerce/purchase"


def _purchase_batch(payloads: list[bytes], publish_ms: int | list[int]) -> pa.RecordBatch:
    published = publish_ms if isinstance(publish_ms, list) else [publish_ms] * len(payloads)
    return pa.RecordBatch.from_pydict(
        {
            "value": pa.array(payloads, pa.binary()),
            "__topic": [PURCHASE] * len(payloads),
            "__messageId": [f"{i}:0:0" for i in range(len(payloads))],
            "__publishTime": pa.array([ms * 1000 for ms in published], pa.timestamp("us", tz="UTC")),
        }
    )


@pytest.mark.parametrize("fast_path", [True, False])
def test_a_value_nested_a_thousand_levels_deep_is_quarantined_and_the_batch_goes_on(
    catalog: Catalog, fast_path: bool
) -> None:
    """The issue's hostile producer: ``amount_usd`` a list nested 1,000 levels deep (orjson accepts up
    to 1,024). Rendering it in the error message used to raise RecursionError and fail the batch."""
    now = 1_790_000_000_000
    hour = now - now % HOUR_MS
    ok = {"uid": 5, "ts": now - 60_000, "amount_usd": 4.99, "status": "success", "channel": "card"}
    deep = b'{"uid": 5, "ts": %d, "status": "success", "amount_usd": %s}' % (
        now - 30_000,
        b"[" * 1000 + b"]" * 1000,
    )
    assert len(deep) < 2100
    later = {**ok, "ts": now - 10_000, "amount_usd": 0.99, "channel": "wallet"}
    batch = _purchase_batch([json.dumps(ok).encode(), deep, json.dumps(later).encode()], now)
    plan = replace(TransformPlan(catalog, ("user_hourly",)), fast_path=fast_path)
    out = pa.Table.from_batches(list(transform(iter([batch]), plan)), schema=output_schema(plan))
    bad = out.filter(pc.equal(out["wh_kind"], "quarantine")).to_pylist()
    assert [(r["wh_message_id"], r["wh_reason"]) for r in bad] == [("1:0:0", "wrong_type")]
    assert bad[0]["wh_detail"].startswith("amount_usd: [[[")
    assert bad[0]["wh_detail"].endswith("is not a double") and len(bad[0]["wh_detail"]) < 120
    assert bad[0]["wh_payload"] == deep
    (stats,) = out.filter(pc.equal(out["wh_kind"], "stats")).to_pylist()
    assert (stats["wh_rows_in"], stats["wh_good"], stats["wh_bad"], stats["wh_late"]) == (3, 2, 1, 0)
    prefix = plan.prefix("user_hourly")
    (row,) = out.filter(pc.equal(out["wh_kind"], "partial")).to_pylist()
    assert row[f"{prefix}uid"] == 5 and round(row[f"{prefix}hour"].timestamp() * 1000) == hour
    assert row[f"{prefix}recharges"] == 2
    assert row[f"{prefix}recharge_usd"] == pytest.approx(5.98)
    assert row[f"{prefix}max_recharge_usd"] == 4.99
    assert row[f"{prefix}last_pay_channel"]["v"] == "wallet"


class Poison:
    """A column state whose every comparison raises: a failure injected in the middle of an event."""

    def _raise(self, other: object) -> bool:
        raise ArithmeticError("poisoned comparison")

    __lt__ = __gt__ = __le__ = __ge__ = _raise


def _purchase(now: int, **change: Any) -> dict[str, Any]:
    return {
        "uid": 5,
        "ts": now - 60_000,
        "amount_usd": 4.99,
        "status": "success",
        "channel": "card",
        **change,
    }


def _poisoned_tables(catalog: Catalog, now: int) -> list[Any]:
    """user_hourly and user_daily (the order purchase folds into them) holding one event for uid 5,
    the daily table's last-folded column (first_recharge_at, a min) poisoned."""
    from widehouse.catalog.semantics.fold import WideRows

    tables = [WideRows(catalog.table(name)) for name in catalog.topic(PURCHASE).tables]
    assert [t.table.name for t in tables] == ["user_hourly", "user_daily"]
    hour = now - now % HOUR_MS
    for rows in tables:
        rows.period_ms = HOUR_MS
        state = rows.rows[(5, hour)] = list(rows.empty)
        state[rows.index["recharges"]] = 1
        state[rows.index["recharge_usd"]] = 4.99
        state[rows.index["max_recharge_usd"]] = 4.99
        state[rows.index["last_pay_channel"]] = (now - 90_000, "card")
    tables[1].rows[(5, hour)][tables[1].index["first_recharge_at"]] = Poison()
    return tables


def test_the_reference_fold_is_atomic_when_a_comparison_raises_mid_event(catalog: Catalog) -> None:
    """An exception after the first table's columns were computed changes no table at all."""
    from widehouse.catalog.semantics.fold import compile_rules, fold_event

    now = 1_790_000_000_000
    tables = _poisoned_tables(catalog, now)
    before = [{k: list(v) for k, v in rows.rows.items()} for rows in tables]
    plans = [(rows, compile_rules(catalog.topic(PURCHASE), rows.table)) for rows in tables]
    event = _purchase(now, amount_usd=99.99, channel="wallet")
    with pytest.raises(ArithmeticError, match="poisoned comparison"):
        fold_event(plans, 5, event["ts"], event, topic=PURCHASE)
    assert [rows.rows for rows in tables] == before
    # another key (a new row) still folds into both tables
    assert fold_event(plans, 6, event["ts"], event, topic=PURCHASE) is None
    assert [rows.rows[(6, now - now % HOUR_MS)][rows.index["recharges"]] for rows in tables] == [1, 1]


def test_the_fast_path_is_atomic_when_a_comparison_raises_mid_event(catalog: Catalog) -> None:
    from widehouse.stream import fastpath

    now = 1_790_000_000_000
    tables = _poisoned_tables(catalog, now)
    before = [{k: list(v) for k, v in rows.rows.items()} for rows in tables]
    handler = fastpath.compile_handler(
        catalog.topic(PURCHASE), tables, catalog.rules, catalog.max_payload_bytes
    )
    assert handler is not None
    with pytest.raises(ArithmeticError, match="poisoned comparison"):
        handler(json.dumps(_purchase(now, amount_usd=99.99, channel="wallet")).encode(), now)
    assert [rows.rows for rows in tables] == before


@pytest.mark.parametrize("fast_path", [True, False])
def test_whatever_one_message_raises_is_its_quarantine_reason(catalog: Catalog, fast_path: bool) -> None:
    """The per-event error boundary: the poisoned event is quarantined ``internal`` with its exception
    named, nothing of it is folded, the counts reconcile, and the next events are folded as usual."""
    from widehouse.stream.transform import _Accumulator

    now = 1_790_000_000_000
    hour = now - now % HOUR_MS
    plan = replace(TransformPlan(catalog, ("user_hourly", "user_daily")), fast_path=fast_path)
    acc = _Accumulator(plan)
    for rows in _poisoned_tables(catalog, now):
        acc.rows[rows.table.name].rows.update(rows.rows)
    before = {name: {k: list(v) for k, v in rows.rows.items()} for name, rows in acc.rows.items()}
    payloads = [
        json.dumps(_purchase(now, amount_usd=99.99, channel="wallet")).encode(),  # uid 5: raises
        json.dumps(_purchase(now, uid=6, amount_usd=0.99)).encode(),
        json.dumps(_purchase(now, uid=6, amount_usd=14.99, ts=now - 30_000, status="failed")).encode(),
    ]
    acc.add(_purchase_batch(payloads, now))
    assert acc.rows["user_hourly"].rows[(5, hour)] == before["user_hourly"][(5, hour)]
    assert acc.rows["user_daily"].rows[(5, hour)] == before["user_daily"][(5, hour)]
    ((slot, counts),) = acc.stats.items()
    assert slot == (PURCHASE, hour)
    assert counts[:4] == [3, 2, 1, 0]  # in, good, bad, late
    # uid 6 landed in both tables: 1 success of 0.99, 1 failure
    for name in ("user_hourly", "user_daily"):
        rows = acc.rows[name]
        state = rows.rows[(6, hour)]
        assert [state[rows.index[c]] for c in ("recharges", "recharge_usd", "recharge_failures")] == [
            1,
            0.99,
            1,
        ]
    # the side row, through the output (the poisoned cell replaced by a real value first)
    acc.rows["user_daily"].rows[(5, hour)][acc.rows["user_daily"].index["first_recharge_at"]] = now
    out = pa.Table.from_batches(list(acc.batches(output_schema(plan))), schema=output_schema(plan))
    (bad,) = out.filter(pc.equal(out["wh_kind"], "quarantine")).to_pylist()
    assert (bad["wh_message_id"], bad["wh_reason"]) == ("0:0:0", "internal")
    assert bad["wh_detail"] == "ArithmeticError: poisoned comparison"
    assert bad["wh_payload"] == payloads[0]
    (stats,) = out.filter(pc.equal(out["wh_kind"], "stats")).to_pylist()
    assert (stats["wh_rows_in"], stats["wh_good"], stats["wh_bad"], stats["wh_late"]) == (3, 2, 1, 0)


def _purchases(payloads: list[bytes], publish_ms: list[int], as_runs: bool) -> Any:
    """Purchase rows as the source's Arrow batch (folded a row at a time) or as the read loop's
    chunk, one run of the topic (folded a run at a time)."""
    from widehouse.stream import transform as transform_module
    from widehouse.stream.transform import _Rows

    if not as_runs:
        return _Rows.of_arrow(_purchase_batch(payloads, publish_ms))
    assert len(payloads) >= transform_module._RUN_ROWS  # one run as long: folded as a run
    return _Rows(
        payloads,
        None,
        publish_ms,
        lambda i: f"{i}:0:0",
        lambda i: publish_ms[i] * 1000,
        runs=[(PURCHASE, len(payloads))],
    )


@pytest.mark.parametrize("as_runs", [True, False])
def test_a_run_that_crosses_publish_hours_back_and_forth_is_counted_per_hour(
    catalog: Catalog, as_runs: bool
) -> None:
    """Hand-made: one topic's rows (a run) published 10:59:59.990, 11:00:00.005, 10:59:59.995 (a
    producer's clock behind), 11:00:01 and 10:00 (late for its hour's counters, still hour 10)."""
    from widehouse.stream.transform import _Accumulator

    h10 = 1_790_000_000_000 - 1_790_000_000_000 % HOUR_MS
    h11 = h10 + HOUR_MS
    publish = [h11 - 10, h11 + 5, h11 - 5, h11 + 1_000, h10] * 4  # 20 rows: a run long enough
    payloads = [
        b"{not json" if ms == h11 + 1_000 else json.dumps(_purchase(ms, uid=7, ts=ms - 1_000)).encode()
        for ms in publish
    ]
    acc = _Accumulator(TransformPlan(catalog, ("user_hourly",)))
    acc._fold(_purchases(payloads, publish, as_runs))
    # [in, good, bad, late, max event ms, max publish ms, min publish ms]
    assert acc.stats == {
        (PURCHASE, h10): [12, 12, 0, 0, h11 - 1_005, h11 - 5, h10],
        (PURCHASE, h11): [8, 4, 4, 0, h11 + 5 - 1_000, h11 + 1_000, h11 + 5],
    }


def test_the_folds_stretches_of_one_hour(catalog: Catalog) -> None:
    from widehouse.stream.transform import _hour_stretches

    h = 1_790_000_000_000 - 1_790_000_000_000 % HOUR_MS
    assert _hour_stretches([h, h + 1, h + HOUR_MS - 1]) == [(0, 3)]
    assert _hour_stretches([h - 1, h, h + 5, h - 2, h + HOUR_MS]) == [(0, 1), (1, 3), (3, 4), (4, 5)]


@pytest.mark.parametrize("as_runs", [True, False])
def test_a_topic_whose_handler_cannot_be_made_quarantines_its_rows_and_the_rest_go_on(
    catalog: Catalog, monkeypatch: pytest.MonkeyPatch, as_runs: bool
) -> None:
    from widehouse.stream import transform as transform_module

    now = 1_790_000_000_000
    acc = transform_module._Accumulator(TransformPlan(catalog, ("user_hourly",)))
    made = acc._handler

    def failing(topic_name: str) -> Any:
        if topic_name == PURCHASE:
            raise RuntimeError("no handler today")
        return made(topic_name)

    monkeypatch.setattr(acc, "_handler", failing)
    payloads = [json.dumps(_purchase(now, uid=u, amount_usd=0.99)).encode() for u in range(16)]
    acc._fold(_purchases(payloads, [now] * 16, as_runs))
    out = pa.Table.from_batches(list(acc.batches(output_schema(acc.plan))), schema=output_schema(acc.plan))
    bad = out.filter(pc.equal(out["wh_kind"], "quarantine")).to_pylist()
    assert [(r["wh_reason"], r["wh_detail"]) for r in bad] == [
        ("internal", "RuntimeError: no handler today")
    ] * 16
    ((_slot, counts),) = acc.stats.items()
    assert counts[:4] == [16, 0, 16, 0]
    assert acc.rows["user_hourly"].rows == {}


def test_rows_whose_runs_do_not_cover_them_are_refused(catalog: Catalog) -> None:
    from widehouse.stream.transform import _Accumulator, _Rows

    acc = _Accumulator(TransformPlan(catalog, ("user_hourly",)))
    rows = _Rows([b"{}", b"{}"], None, [1, 2], str, lambda i: i * 1000, runs=[(PURCHASE, 1)])
    with pytest.raises(ValueError, match="cover 1 rows, not its 2"):
        acc._fold(rows)
    with pytest.raises(ValueError, match="one of the two"):
        _Rows([b"{}"], [PURCHASE], [1], str, lambda i: i * 1000, runs=[(PURCHASE, 1)])


@pytest.mark.parametrize("as_runs", [True, False])
def test_the_latest_event_time_counts_whichever_path_folded_it(catalog: Catalog, as_runs: bool) -> None:
    """An integer in a double field takes the reference path; the latest event of the hour is one."""
    from widehouse.stream.transform import _Accumulator

    now = 1_790_000_000_000
    events = [_purchase(now, uid=u, ts=now - 60_000 + u) for u in range(15)]
    events.append(_purchase(now, uid=99, ts=now - 1_000, amount_usd=3))  # the latest, an int
    acc = _Accumulator(TransformPlan(catalog, ("user_hourly",)))
    acc._fold(_purchases([json.dumps(e).encode() for e in events], [now] * 16, as_runs))
    ((_slot, counts),) = acc.stats.items()
    assert counts[:5] == [16, 16, 0, 0, now - 1_000]

"""Helpers of bench/stream_wide.py: the join-based alternative, and synthetic many-topic catalogs.

The alternative a user would build without Widehouse's union: every topic lands in its own narrow
ClickHouse table (key, event time, the fields the wide table needs), and the wide row is assembled
at query time by joining the topics' per-(key, hour) aggregates on (key, hour). Both sides parse
with the same reference parser, so the comparison is about the data model, not the parser.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pyarrow as pa

from widehouse import clickhouse
from widehouse.catalog import Accepted, Catalog, load_catalog
from widehouse.catalog.filters import Path as FieldPath
from widehouse.clickhouse.ddl import apply_ddl
from widehouse.contracts.periods import HOUR_MS
from widehouse.contracts.types import CLICKHOUSE_TYPES, KIND_TYPES, arrow_type
from widehouse.generator.core import TrafficGenerator
from widehouse.generator.manifest import diff_rows
from widehouse.generator.options import GenerateOptions
from widehouse.testing import reference_rows, reference_verdicts, source_batch

CH_TYPES = {kind: f"Nullable({ch})" for kind, ch in CLICKHOUSE_TYPES.items()}
ARROW = {kind: arrow_type(t.hbase) for kind, t in KIND_TYPES.items()}  # timestamps in ms, as ClickHouse's
TABLE = "user_hourly"


def _flat(path: FieldPath) -> str:
    return "f_" + "_".join(path)


def _events(catalog: Catalog, count: int) -> pa.RecordBatch:
    base = (int(time.time() * 1000) // HOUR_MS - 2) * HOUR_MS
    generator = TrafficGenerator(catalog, GenerateOptions(count=count, rate=0, users=5000, seed=5), base)
    return source_batch(catalog, generator, base)


def _timed(fn: Any, runs: int = 1) -> tuple[Any, float]:
    best = float("inf")
    result = None
    for _ in range(runs):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return result, best


# -------------------------------------------------------------------------------- union
def _union(client: Any, catalog: Catalog, batch: pa.RecordBatch) -> tuple[float, int]:
    import pyarrow.compute as pc

    from bench.common import stream_plan
    from widehouse.stream.transform import transform

    plans = stream_plan()
    plan = plans.TransformPlan(catalog, (TABLE,))
    prefix = plan.prefix(TABLE)
    wide = catalog.table(TABLE)
    names = [wide.key_name, "hour", *[c.name for c in wide.columns]]

    def ingest() -> int:
        out = pa.Table.from_batches(list(transform(iter([batch]), plan)), schema=plans.output_schema(plan))
        partial = out.filter(pc.equal(out["wh_kind"], "partial")).select([prefix + n for n in names])
        partial = partial.rename_columns(names)
        client.insert_arrow(f"{TABLE}_partial", partial)
        return int(partial.num_rows)

    rows, seconds = _timed(ingest)
    return seconds, rows


# -------------------------------------------------------------------------------- join
def _narrow_fields(catalog: Catalog) -> dict[str, dict[FieldPath, str]]:
    """Per topic mapped into the table: the field paths its mappings and filters read, with types."""
    result: dict[str, dict[FieldPath, str]] = {}
    for topic in catalog.topics_for(TABLE):
        fields: dict[FieldPath, str] = {}
        for mapping in topic.mappings_for(TABLE):
            paths = ([mapping.field] if mapping.field else []) + list(
                mapping.filter.fields if mapping.filter else []
            )
            for path in paths:
                fields[tuple(path)] = topic.field(tuple(path)).type.kind
        result[str(topic.name)] = fields
    return result


def _join_ingest(client: Any, catalog: Catalog, batch: pa.RecordBatch) -> tuple[float, int]:
    fields = _narrow_fields(catalog)
    names = {t: f"narrow_{i:02d}" for i, t in enumerate(sorted(fields))}
    for topic, table in names.items():
        columns = ", ".join(f"`{_flat(p)}` {CH_TYPES[k]}" for p, k in fields[topic].items())
        client.command(f"DROP TABLE IF EXISTS {table}")
        client.command(
            f"CREATE TABLE {table} (k Int64, ts DateTime64(3, 'UTC'){', ' + columns if columns else ''}) "
            "ENGINE = MergeTree ORDER BY (k, ts)"
        )

    def ingest() -> int:
        rows: dict[str, dict[str, list[Any]]] = {
            t: {"k": [], "ts": [], **{_flat(p): [] for p in fields[t]}} for t in names
        }
        for topic, _, _, result in reference_verdicts(catalog, batch):
            if topic not in names or not isinstance(result, Accepted) or result.late:
                continue
            target = rows[topic]
            target["k"].append(result.key)
            target["ts"].append(result.event_ms)
            for path in fields[topic]:
                value: Any = result.row
                for part in path:
                    value = value.get(part) if isinstance(value, dict) else None
                target[_flat(path)].append(value)
        total = 0
        for topic, table in names.items():
            data = rows[topic]
            arrays = {
                "k": pa.array(data["k"], pa.int64()),
                "ts": pa.array(data["ts"], pa.timestamp("ms", tz="UTC")),
            }
            for path, kind in fields[topic].items():
                arrays[_flat(path)] = pa.array(data[_flat(path)], ARROW[kind])
            client.insert_arrow(table, pa.table(arrays))
            total += len(data["k"])
        return total

    rows_stored, seconds = _timed(ingest)
    return seconds, rows_stored


def _agg(mapping: Any) -> str:
    cond = mapping.filter.to_spark_sql(lambda p: f"`{_flat(tuple(p))}`") if mapping.filter else "1"
    if mapping.agg == "count":
        return f"toUInt64(countIf({cond}))"
    value = f"`{_flat(tuple(mapping.field))}`"
    present = f"({cond}) AND {value} IS NOT NULL"
    inner = {
        "sum": f"sumIf({value}, {present})",
        "min": f"minIf({value}, {present})",
        "max": f"maxIf({value}, {present})",
        "first": f"minIf((ts, {value}), {present}).2",
        "last": f"maxIf((ts, {value}), {present}).2",
    }[mapping.agg]
    return f"if(countIf({present}) = 0, NULL, {inner})"


def _combine(agg: str, exprs: list[str]) -> str:
    if len(exprs) == 1:
        return f"coalesce({exprs[0]}, 0)" if agg == "count" else exprs[0]
    if agg == "count":
        return " + ".join(f"coalesce({e}, 0)" for e in exprs)
    array = f"arrayFilter(x -> isNotNull(x), [{', '.join(exprs)}])"
    fn = {"sum": "arraySum", "min": "arrayMin", "max": "arrayMax"}.get(agg)
    if fn is None:  # first/last across topics: by event time, needs the pairs; not in the demo catalog
        raise NotImplementedError(f"{agg} from several topics")
    return f"if(empty({array}), NULL, {fn}({array}))"


def join_sql(catalog: Catalog, where: str = "") -> str:
    """The wide table assembled at query time: the (uid, hour) keys of every topic, LEFT JOIN each
    topic's aggregates, then producers of one column combined."""
    wide = catalog.table(TABLE)
    topics = list(catalog.topics_for(TABLE))
    names = {name: f"narrow_{i:02d}" for i, name in enumerate(sorted(str(t.name) for t in topics))}
    keys = " UNION ALL ".join(
        f"SELECT k, toStartOfHour(ts) AS hour FROM {names[str(t.name)]} {where}" for t in topics
    )
    subqueries = []
    producers: dict[str, list[str]] = {c.name: [] for c in wide.columns}
    for i, topic in enumerate(topics):
        alias = f"a{i}"
        aggs = [f"{_agg(m)} AS c_{m.column}" for m in topic.mappings_for(TABLE)]
        for m in topic.mappings_for(TABLE):
            producers[m.column].append(f"{alias}.c_{m.column}")
        subqueries.append(
            f"LEFT JOIN (SELECT k, toStartOfHour(ts) AS hour, {', '.join(aggs)} "
            f"FROM {names[str(topic.name)]} {where} GROUP BY k, hour) AS {alias} "
            f"ON {alias}.k = keys.k AND {alias}.hour = keys.hour"
        )
    columns = [f"{_combine(c.agg, producers[c.name])} AS `{c.name}`" for c in wide.columns]
    return (
        f"SELECT keys.k AS uid, keys.hour AS hour, {', '.join(columns)} "
        f"FROM (SELECT DISTINCT k, hour FROM ({keys})) AS keys {' '.join(subqueries)} "
        "SETTINGS join_use_nulls = 1"
    )


# -------------------------------------------------------------------------------- compare
def compare(settings: Any, events: int) -> dict[str, Any]:
    catalog = load_catalog(settings.schemas_dir)
    client = clickhouse.connect(settings.clickhouse)
    database = clickhouse.database_name(settings.clickhouse)
    apply_ddl(client, catalog, database)
    client.command(f"TRUNCATE TABLE IF EXISTS {TABLE}_partial")
    batch = _events(catalog, events)
    expected = reference_rows(catalog, batch)[TABLE]
    sample_uid = next(iter(expected))[0]

    union_ingest, _ = _union(client, catalog, batch)
    union_rows = client.query(f"SELECT count() FROM {TABLE}_partial").result_rows[0][0]
    union_result, union_query = _timed(
        lambda: list(client.query(f"SELECT * FROM {TABLE}_merged").named_results()), runs=3
    )
    _, union_point = _timed(
        lambda: client.query(f"SELECT * FROM {TABLE}_merged WHERE uid = {sample_uid}").result_rows, runs=10
    )

    join_ingest, join_rows = _join_ingest(client, catalog, batch)
    join_result, join_query = _timed(lambda: list(client.query(join_sql(catalog)).named_results()), runs=3)
    point_sql = join_sql(catalog, where=f"WHERE k = {sample_uid}")
    _, join_point = _timed(lambda: client.query(point_sql).result_rows, runs=10)

    def check(rows: list[dict[str, Any]]) -> str:
        problems = diff_rows(expected, {(r["uid"], r["hour"]): r for r in rows})
        return "exact" if not problems else f"{len(problems)} differences: {problems[0]}"

    return {
        "events": batch.num_rows,
        "rows": len(expected),
        "union_ingest_s": union_ingest,
        "union_rows": union_rows,
        "union_query_s": union_query,
        "union_point_ms": union_point * 1000,
        "union_check": check(union_result),
        "join_ingest_s": join_ingest,
        "join_rows": join_rows,
        "join_query_s": join_query,
        "join_point_ms": join_point * 1000,
        "join_check": check(join_result),
    }


# -------------------------------------------------------------------------------- many topics
def synthetic_catalog(root: Path, topics: int) -> Path:
    """A catalog of ``topics`` identical click-like topics feeding one hourly wide table."""
    schemas = root / "schemas"
    (schemas / "tables").mkdir(parents=True, exist_ok=True)
    (schemas / "catalog.yaml").write_text(
        "name: bench\nlimits: {max_payload_bytes: 65536}\n"
        "event_time: {lateness: 1h, max_future: 5m, max_age: 7d}\n"
    )
    (schemas / "tables" / f"{TABLE}.yaml").write_text(
        f"wide_table: {TABLE}\ngrain: hour\nkey: {{name: uid, type: long}}\ncolumns:\n"
        "  - {name: events}\n  - {name: amount}\n  - {name: max_amount}\n  - {name: last_page}\n"
    )
    folder = schemas / "topics" / "bench" / "t"
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(topics):
        (folder / f"t{i:04d}.yaml").write_text(
            f"topic: persistent://bench/t/t{i:04d}\nkey: uid\nevent_time: ts\n"
            "fields:\n  uid: long\n  ts: timestamp-ms\n"
            "  page: {type: string, values: [home, feed, live, shop, wallet]}\n"
            "  amount: {type: double, range: [0, 100]}\n"
            f"columns:\n  {TABLE}:\n    events: count\n    amount: sum(amount)\n"
            "    max_amount: max(amount)\n    last_page: last(page)\n"
        )
    load_catalog(schemas)  # fail here, not inside the stream, if the template is wrong
    return schemas

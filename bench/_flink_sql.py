"""Flink SQL for a wide table, generated from the catalog: BIGO's shape, for ``bench.flink_compare``.

One source table per topic (the Flink Pulsar connector, JSON values, the publish time and the
message size as metadata columns), one ``SELECT`` per topic projecting its mappings onto the wide
table's columns, ``UNION ALL`` of those, then ``GROUP BY`` key and hour. Nothing is written per
topic by hand: the payload types, the filters, the validity rules and the aggregates all come from
:mod:`widehouse.catalog`, so the job computes what the stream's wide rows hold:

- rows the stream would quarantine or set aside as late are filtered out: key and event time
  present, event time positive, not more than ``max_future`` ahead of the publish time, not more
  than ``lateness`` behind it (``max_age`` is longer than ``lateness``, so it needs no test), payload
  not over ``max_payload_bytes``; a payload that does not parse as JSON of the declared types is
  dropped by the JSON format (``json.ignore-parse-errors``): that covers invalid UTF-8, empty
  payloads, most malformed JSON and most wrong types, but the JSON format *coerces* a number into a
  string field and any text into a boolean (``'yes'`` reads as false) and reads a JSON object
  followed by a stray ``}`` (Jackson stops after the first value), where the stream quarantines the
  event (the generator's ``wrong_type`` and ``malformed_json`` classes). Those events make the only
  differences (measured: ``bench.flink_compare --bad-classes``);
- ``count`` -> ``SUM(CASE WHEN filter THEN 1 ELSE 0 END)`` (0 where no topic of the key counts),
  ``sum``/``min``/``max`` -> the same function of ``CASE WHEN filter THEN value END``;
- ``first``/``last`` by event time: Flink SQL has no arg-min/arg-max (its ``FIRST_VALUE`` and
  ``LAST_VALUE`` follow arrival order), so they are ``MIN``/``MAX`` of a text made of the zero-padded
  event time and the value's text, the value cut out again and cast back. Exact for the event-time
  order; ties on the same millisecond go to the smaller/larger value *text* (the stream compares
  values, which differs only for numbers of different lengths at the same millisecond);
- ``timestamp-ms`` values (epoch milliseconds in the payload) stay epoch milliseconds (``BIGINT``),
  and the hour is the epoch millisecond of the UTC hour's start.

Light: imports the catalog only, never pyflink (the job runs in its own virtualenv).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from widehouse.catalog import Catalog, ColumnMapping, Topic
from widehouse.catalog.filters import (
    And,
    Compare,
    Expr,
    FieldRef,
    InList,
    IsNull,
    Literal,
    Not,
    Or,
    Path,
    Truthy,
)
from widehouse.catalog.types import FieldType
from widehouse.contracts.periods import HOUR_MS
from widehouse.contracts.types import FLINK_PAYLOAD_TYPES

MERGE = {"count": "SUM", "sum": "SUM", "min": "MIN", "max": "MAX", "first": "MIN", "last": "MAX"}
"""The GROUP BY function of each catalog aggregate (first/last: of the time-prefixed text)."""
PUBLISH = "wh_publish_time"
SIZE = "wh_message_size"
KEY = "wh_key"
HOUR = "wh_hour"
TOKEN_PLUGIN = "org.apache.pulsar.client.impl.auth.AuthenticationToken"
TIME_DIGITS = 13
"""Digits of an epoch-millisecond event time until the year 2286: the padding of first/last keys."""


@dataclass(frozen=True)
class PulsarEndpoint:
    """Where the Flink job reads: the broker's service URL and, when the broker wants one, a token."""

    service_url: str
    token: str | None = None
    subscription_type: str = "Exclusive"
    """The connector's subscription type: ``Exclusive`` (its default) or ``Shared``. Each partition
    has one reader either way (its split's)."""


def q(name: str) -> str:
    """A backticked identifier (catalog names are validated: no backtick can occur)."""
    return f"`{name}`"


def flink_type(kind: FieldType) -> str:
    """The Flink SQL type of a payload field type (objects as ``ROW``, containers as ``ARRAY``/``MAP``)."""
    if kind.kind == "object":
        return "ROW<" + ", ".join(f"{q(f.name)} {flink_type(f.type)}" for f in kind.fields) + ">"
    if kind.kind == "array":
        assert kind.element is not None
        return f"ARRAY<{flink_type(kind.element)}>"
    if kind.kind == "map":
        assert kind.element is not None
        return f"MAP<STRING, {flink_type(kind.element)}>"
    return FLINK_PAYLOAD_TYPES[kind.kind]


def field_ref(path: Path) -> str:
    """``gift.diamonds`` -> ``\\`gift\\`.\\`diamonds\\``` (a nested ROW field)."""
    return ".".join(q(part) for part in path)


def flink_literal(value: int | float | str | bool) -> str:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value) if -(2**31) <= value < 2**31 else f"CAST({value} AS BIGINT)"
    if isinstance(value, float):
        return f"CAST({value!r} AS DOUBLE)"
    # the catalog's filter tokenizer admits no quote, backslash or control character in a string
    return "'" + value + "'"


def filter_sql(expr: Expr, ref: Callable[[Path], str] = field_ref) -> str:  # noqa: PLR0911 - per node kind
    """A catalog filter (its AST, never its text) as a Flink SQL boolean expression."""

    def operand(node: FieldRef | Literal) -> str:
        return ref(node.path) if isinstance(node, FieldRef) else flink_literal(node.value)

    if isinstance(expr, And):
        return "(" + " AND ".join(filter_sql(i, ref) for i in expr.items) + ")"
    if isinstance(expr, Or):
        return "(" + " OR ".join(filter_sql(i, ref) for i in expr.items) + ")"
    if isinstance(expr, Not):
        return f"(NOT {filter_sql(expr.item, ref)})"
    if isinstance(expr, Compare):
        return f"({operand(expr.left)} {expr.op} {operand(expr.right)})"
    if isinstance(expr, InList):
        values = ", ".join(flink_literal(v.value) for v in expr.values)
        return f"({ref(expr.operand.path)} {'NOT IN' if expr.negated else 'IN'} ({values}))"
    if isinstance(expr, IsNull):
        return f"({ref(expr.operand.path)} IS {'NOT NULL' if expr.negated else 'NULL'})"
    if isinstance(expr, Truthy):
        return f"({ref(expr.operand.path)} IS TRUE)"
    raise TypeError(f"unknown filter node {expr!r}")


def source_table(index: int) -> str:
    """The Flink table name of the ``index``-th topic (topic names hold ``/`` and ``-``)."""
    return f"src_{index:03d}"


def source_ddl(topic: Topic, table: str, pulsar: PulsarEndpoint, subscription: str) -> str:
    """``CREATE TABLE`` of one topic: every declared payload field, the publish time and the size,
    read from the earliest message and stopping at the latest one (a bounded source)."""
    columns = [f"  {q(f.name)} {flink_type(f.type)}" for f in topic.fields]
    columns.append(f"  {q(PUBLISH)} TIMESTAMP_LTZ(3) METADATA FROM 'publish_time' VIRTUAL")
    columns.append(f"  {q(SIZE)} INT METADATA FROM 'message_size' VIRTUAL")
    options = {
        "connector": "pulsar",
        "topics": str(topic.name),
        "service-url": pulsar.service_url,
        "source.subscription-name": subscription,
        "source.subscription-type": pulsar.subscription_type,
        "source.start.message-id": "earliest",
        "source.stop.at-message-id": "latest",
        # no partition discovery: once its partitions are read, a source tells its readers there is
        # nothing more, so the job ends (the SQL source is unbounded even with a stop cursor)
        "pulsar.source.partitionDiscoveryIntervalMs": "-1",
        "format": "json",
        "json.ignore-parse-errors": "true",
        "json.fail-on-missing-field": "false",
    }
    if pulsar.token:
        options["pulsar.client.authPluginClassName"] = (
            "org.apache.pulsar.client.impl.auth.AuthenticationToken"
        )
        options["pulsar.client.authParams"] = f"token:{pulsar.token}"
    rendered = ",\n".join(f"  '{k}' = '{v}'" for k, v in options.items())
    return f"CREATE TEMPORARY TABLE {q(table)} (\n" + ",\n".join(columns) + f"\n) WITH (\n{rendered}\n)"


def valid_rows(topic: Topic, catalog: Catalog) -> str:
    """The ``WHERE`` clause keeping what the stream puts in wide rows (see the module docstring)."""
    rules = catalog.rules
    key, et = q(topic.key), q(topic.event_time)
    # epoch-ms arithmetic on the event time, compared as instants with the publish time
    return " AND ".join(
        [
            f"{key} IS NOT NULL",
            f"{et} IS NOT NULL",
            f"{et} > 0",
            f"TO_TIMESTAMP_LTZ({et} - {rules.max_future_ms}, 3) <= {q(PUBLISH)}",
            f"{q(PUBLISH)} <= TO_TIMESTAMP_LTZ({et} + {rules.lateness_ms}, 3)",
            f"{q(SIZE)} <= {catalog.max_payload_bytes}",
        ]
    )


def _value_text(mapping: ColumnMapping, value: str) -> str:
    return value if mapping.source_type == "string" else f"CAST({value} AS STRING)"


def mapping_expr(topic: Topic, mapping: ColumnMapping) -> str:
    """The per-event value one mapping contributes to its column (NULL where it contributes none)."""
    passes = filter_sql(mapping.filter.expr) if mapping.filter is not None else None
    if mapping.agg == "count":
        return f"CASE WHEN {passes} THEN 1 ELSE 0 END" if passes else "1"
    assert mapping.field is not None
    value = field_ref(mapping.field)
    if mapping.agg == "sum" and mapping.value_type != mapping.source_type:
        value = f"CAST({value} AS {FLINK_PAYLOAD_TYPES[mapping.value_type]})"
    if mapping.agg in ("first", "last"):
        et = q(topic.event_time)
        pair = f"CONCAT(LPAD(CAST({et} AS STRING), {TIME_DIGITS}, '0'), {_value_text(mapping, value)})"
        condition = f"{passes} AND {value} IS NOT NULL" if passes else f"{value} IS NOT NULL"
        return f"CASE WHEN {condition} THEN {pair} END"
    return f"CASE WHEN {passes} THEN {value} END" if passes else value


def column_types(catalog: Catalog, table: str) -> dict[str, str]:
    """Flink type of each column as the union carries it (first/last: the pair's text)."""
    wide = catalog.table(table)
    return {c.name: "STRING" if c.is_pair else FLINK_PAYLOAD_TYPES[c.value_type] for c in wide.columns}


def topic_select(catalog: Catalog, table: str, topic: Topic, source: str) -> str:
    """One branch of the union: key, hour and every column of ``table`` (NULL where the topic has none)."""
    wide = catalog.table(table)
    key_type = FLINK_PAYLOAD_TYPES[wide.key_type]
    types = column_types(catalog, table)
    mine = {m.column: m for m in topic.mappings_for(table)}
    et = q(topic.event_time)
    items = [
        f"CAST({q(topic.key)} AS {key_type}) AS {q(KEY)}",
        f"{et} - MOD({et}, {HOUR_MS}) AS {q(HOUR)}",
    ]
    for column in wide.columns:
        mapping = mine.get(column.name)
        value = mapping_expr(topic, mapping) if mapping is not None else "NULL"
        items.append(f"CAST({value} AS {types[column.name]}) AS {q(column.name)}")
    body = ",\n    ".join(items)
    return f"  SELECT\n    {body}\n  FROM {q(source)}\n  WHERE {valid_rows(topic, catalog)}"


def aggregate_expr(catalog: Catalog, table: str, column: str) -> str:
    """The ``GROUP BY`` aggregate of one column (first/last: cut the value out of the pair)."""
    wide = catalog.table(table)
    c = wide.column(column)
    function = {"count": "SUM", "sum": "SUM", "min": "MIN", "max": "MAX", "first": "MIN", "last": "MAX"}[
        c.agg
    ]
    if c.agg == "count":  # a wide row's count is 0, not NULL, where the key had no such event
        return f"COALESCE(SUM({q(column)}), 0)"
    if not c.is_pair:
        return f"{function}({q(column)})"
    text = f"SUBSTR({function}({q(column)}), {TIME_DIGITS + 1})"
    return text if c.value_type == "string" else f"CAST({text} AS {FLINK_PAYLOAD_TYPES[c.value_type]})"


def hourly_query(catalog: Catalog, table: str, sources: Mapping[str, str]) -> str:
    """``SELECT`` of ``table``'s rows: UNION ALL of a branch per topic in ``sources`` (topic name ->
    Flink table), GROUP BY key and hour. Columns: key, hour (epoch ms), the table's columns in order."""
    if not sources:
        raise ValueError(f"no topics feed {table!r}: nothing to union")
    branches = "\n  UNION ALL\n".join(
        topic_select(catalog, table, catalog.topic(name), source) for name, source in sources.items()
    )
    wide = catalog.table(table)
    aggs = ",\n  ".join(f"{aggregate_expr(catalog, table, c.name)} AS {q(c.name)}" for c in wide.columns)
    return f"SELECT\n  {q(KEY)},\n  {q(HOUR)},\n  {aggs}\nFROM (\n{branches}\n)\nGROUP BY {q(KEY)}, {q(HOUR)}"


def sink_ddl(name: str) -> str:
    """A print sink of one JSON text per changed row (the job's changelog: ``+I``, ``-U``, ``+U``)."""
    return f"CREATE TEMPORARY TABLE {q(name)} (\n  {q('row')} STRING\n) WITH (\n  'connector' = 'print'\n)"


def as_json(catalog: Catalog, table: str, query: str) -> str:
    """``query``'s rows as one JSON object each (column name -> value, nulls kept): text that the print
    sink writes unambiguously whatever the strings hold."""
    pairs = ", ".join(f"'{name}' VALUE {q(name)}" for name, _ in output_columns(catalog, table))
    return f"SELECT JSON_OBJECT({pairs} NULL ON NULL) FROM (\n{query}\n)"


def output_columns(catalog: Catalog, table: str) -> list[tuple[str, str]]:
    """(name, catalog kind) of every column the sink holds, in order (key, hour, then the table's)."""
    wide = catalog.table(table)
    return [(KEY, wide.key_type), (HOUR, "long"), *((c.name, c.value_type) for c in wide.columns)]


def job_statements(
    catalog: Catalog, table: str, topics: Sequence[str], pulsar: PulsarEndpoint, subscription: str
) -> list[str]:
    """Every statement of the job, in order: a source table per topic, the sink, the INSERT."""
    sources = {name: source_table(i) for i, name in enumerate(topics)}
    ddl = [source_ddl(catalog.topic(name), src, pulsar, subscription) for name, src in sources.items()]
    sink = "wh_sink"
    insert = f"INSERT INTO {q(sink)}\n{as_json(catalog, table, hourly_query(catalog, table, sources))}"
    return [*ddl, sink_ddl(sink), insert]

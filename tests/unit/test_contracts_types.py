"""Catalog kinds rendered per store (``widehouse.contracts.types``): one table, each store's view of it."""

from __future__ import annotations

import ast
from pathlib import Path

import pyarrow as pa
import pytest

from widehouse.catalog.types import SCALARS
from widehouse.contracts import types
from widehouse.hbase import codec
from widehouse.stream.output import ARROW_VALUE_TYPES, TIMESTAMP

ROOT = Path(__file__).parents[2]
UTC_US = pa.timestamp("us", tz="UTC")
UTC_MS = pa.timestamp("ms", tz="UTC")


def test_every_catalog_kind_has_a_row() -> None:
    assert (
        SCALARS == ("long", "int", "double", "string", "boolean", "timestamp-ms") == tuple(types.KIND_TYPES)
    )


def test_the_spark_and_clickhouse_renderings() -> None:
    assert types.SPARK_PAYLOAD_TYPES == {
        "long": "bigint",
        "int": "int",
        "double": "double",
        "string": "string",
        "boolean": "boolean",
        "timestamp-ms": "bigint",  # epoch milliseconds inside a payload
    }
    assert types.SPARK_VALUE_TYPES == {**types.SPARK_PAYLOAD_TYPES, "timestamp-ms": "timestamp"}
    assert types.CLICKHOUSE_TYPES == {
        "long": "Int64",
        "int": "Int32",
        "double": "Float64",
        "string": "String",
        "boolean": "Bool",
        "timestamp-ms": "DateTime64(3, 'UTC')",
    }


def test_the_arrow_renderings() -> None:
    plain = {"long": pa.int64(), "int": pa.int32(), "double": pa.float64(), "string": pa.string()}
    plain["boolean"] = pa.bool_()
    assert {**plain, "timestamp-ms": UTC_US} == ARROW_VALUE_TYPES and TIMESTAMP == UTC_US
    assert {k: codec.arrow_type(k) for k in codec.KINDS} == {
        "count": pa.int64(),
        **plain,
        "timestamp-ms": UTC_MS,
    }
    payload = {k: types.arrow_type(t.arrow_payload) for k, t in types.KIND_TYPES.items()}
    assert payload == {**plain, "timestamp-ms": pa.int64()}
    assert {k: types.arrow_type(v) for k, v in types.ARROW_OF_SPARK.items()} == {
        "bigint": pa.int64(),
        "int": pa.int32(),
        "double": pa.float64(),
        "string": pa.string(),
        "boolean": pa.bool_(),
        "timestamp": UTC_US,
        "date": pa.date32(),
    }
    with pytest.raises(ValueError, match="unknown Arrow type name"):
        types.arrow_type("decimal")


_HOME = ROOT / "spark" / "widehouse" / "contracts" / "types.py"
_KINDS = set(types.KIND_TYPES)
_NOT_TYPE_MAPS = {
    ("spark/widehouse/clickhouse/ddl.py", "_TYPE_DEFAULTS"),  # ClickHouse zero values (left: see NOTES)
    ("spark/widehouse/generator/badinput.py", "_WRONG_VALUES"),  # test data: a wrong value per kind
    ("bench/daily_merge.py", "values"),  # sample data per kind
    ("bench/batch_scale.py", "values"),  # sample data per kind (ClickHouse expressions)
    ("spark/widehouse/pulsar/schemas.py", "_PRIMITIVES"),  # the other way: Avro -> catalog kind
}
"""Maps keyed by every catalog kind that hold data, not a store's type."""


def _named_dicts(tree: ast.AST) -> list[tuple[str, ast.Dict]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Dict):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            name = next((t.id for t in targets if isinstance(t, ast.Name)), "?")
            found.append((name, node.value))
        elif isinstance(node, ast.Return) and isinstance(node.value, ast.Dict):
            found.append(("return", node.value))
    return found


def test_catalog_kinds_are_mapped_to_store_types_only_in_the_types_contract() -> None:
    files = [*(ROOT / "spark").rglob("*.py"), *(ROOT / "dags").rglob("*.py"), *(ROOT / "bench").rglob("*.py")]
    found = []
    for path in sorted(f for f in files if f != _HOME):
        where = str(path.relative_to(ROOT))
        for name, node in _named_dicts(ast.parse(path.read_text(), where)):
            keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
            if len(keys & _KINDS) >= 5 and (where, name) not in _NOT_TYPE_MAPS:
                found.append(f"{where}:{node.lineno} maps catalog kinds ({name})")
    assert found == [], "render from widehouse.contracts.types:\n" + "\n".join(found)

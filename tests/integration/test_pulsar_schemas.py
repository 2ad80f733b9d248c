"""Pulsar's schema registry: reading JSON- and Avro-schema topics, and the catalog check against it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from typing import Any

import pytest

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from widehouse.pulsar import PulsarAdmin, TopicName
from widehouse.settings import Settings

pytestmark = [pytest.mark.integration]


def _record() -> Any:
    from pulsar.schema import Array, Double, Long, Map, Record, String

    class Click(Record):
        uid = Long(required=True)
        page = String()
        score = Double()
        tags = Array(String())
        attrs = Map(String())

    return Click


@pytest.mark.spark
@pytest.mark.parametrize("kind", ["json", "avro"])
def test_registry_schema_topics_read_back_as_fields(
    spark: Any, services: Settings, ns: str, kind: str
) -> None:
    from pulsar.schema import AvroSchema, JsonSchema

    from widehouse.pulsar import client as pulsar_client
    from widehouse.source import register

    register(spark)
    topic = f"persistent://{ns}/clicks-{kind}"
    click = _record()
    client = pulsar_client.connect(services.pulsar)
    try:
        producer = client.create_producer(
            topic, schema=JsonSchema(click) if kind == "json" else AvroSchema(click)
        )
        producer.send(click(uid=7, page="home", score=1.5, tags=["a", "b"], attrs={"k": "v"}))
        producer.send(click(uid=8, page=None, score=None, tags=[], attrs={}))
        producer.close()
        raw = client.create_producer(topic)  # no schema: a payload the registry's schema does not fit
        raw.send(b"\xff not a record")
        raw.close()
    finally:
        client.close()
    df = spark.read.format("pulsar").options(topics=topic, schema="registry").load()
    assert df.columns[:5] == ["uid", "page", "score", "tags", "attrs"]
    assert df.columns[-1] == "__decodeError"
    rows = sorted(
        df.select("uid", "page", "score", "tags", "attrs", "__decodeError", "value").collect(),
        key=lambda r: (r.uid is None, r.uid),
    )
    assert [tuple(r)[:5] for r in rows] == [
        (7, "home", 1.5, ["a", "b"], {"k": "v"}),
        (8, None, None, [], {}),
        (None, None, None, None, None),
    ]
    assert rows[0]["__decodeError"] is None
    assert rows[1]["__decodeError"] is None
    assert rows[2]["__decodeError"].startswith(f"{kind.upper()} decode failed")
    assert rows[2].value == b"\xff not a record"  # the raw payload stays
    # raw (the default) leaves value alone
    assert spark.read.format("pulsar").options(topics=topic).load().count() == 3


def _register(admin: PulsarAdmin, topic: str, kind: str, fields: list[dict[str, Any]]) -> None:
    name = TopicName.parse(topic)
    definition = json.dumps({"type": "record", "name": "E", "fields": fields})
    body = {"type": kind, "schema": definition, "properties": {}}
    admin.request("POST", f"schemas/{name.tenant}/{name.namespace}/{name.local}/schema", json=body)


def test_catalog_against_registry_lists_every_difference(services: Settings) -> None:
    from widehouse.catalog.loader import load_catalog
    from widehouse.catalog.registry_check import SchemaDifference, check_against_registry

    catalog = load_catalog(services.schemas_dir).relocated(f"s{uuid.uuid4().hex[:6]}")
    join = next(t for t in catalog.topics if str(t.name).endswith("/social/group_join"))
    follow = next(t for t in catalog.topics if str(t.name).endswith("/social/follow"))
    with PulsarAdmin(services.pulsar) as admin:
        admin.ensure_namespace(join.name.full_namespace)
        # group_join in the catalog: uid long, ts timestamp-ms, group_id long, group_size int, invited_by long
        _register(
            admin,
            str(join.name),
            "JSON",
            [
                {"name": "uid", "type": "long"},
                {"name": "ts", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}]},
                {"name": "group_id", "type": ["null", "string"]},
                {"name": "group_size", "type": "int"},
                {"name": "source", "type": "string"},
            ],
        )
        follow_fields = [
            {"name": f.name, "type": "long" if f.type.kind == "timestamp-ms" else f.type.kind}
            for f in follow.fields
        ]
        _register(admin, str(follow.name), "AVRO", follow_fields)
        differences = check_against_registry(catalog, admin)
    ours = [d for d in differences if d.topic in (str(join.name), str(follow.name))]
    assert ours == sorted(
        [
            SchemaDifference(str(follow.name), "schema type", catalog="JSON", registry="AVRO"),
            SchemaDifference(str(join.name), "extra field", "source", registry="string"),
            SchemaDifference(str(join.name), "missing field", "invited_by", catalog="long"),
            SchemaDifference(str(join.name), "type mismatch", "group_id", catalog="long", registry="string"),
        ]
    )
    missing = {d.topic for d in differences if d.kind == "missing topic schema"}
    assert missing == {str(t.name) for t in catalog.topics} - {str(join.name), str(follow.name)}


def test_catalog_check_cli_exits_non_zero_on_differences(services: Settings, tmp_path: Any) -> None:
    env = {**os.environ, "WIDEHOUSE_STATE_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "widehouse", "catalog", "check", "--against-pulsar"],
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr[-2000:]
    assert "missing topic schema" in done.stdout
    assert "difference(s) in" in done.stdout

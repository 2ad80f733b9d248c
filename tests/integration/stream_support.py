"""Helpers for the streaming job's tests: an isolated deployment, the job as a subprocess, read-back.

Each test gets its own state dir (Delta tables, checkpoints), its own ClickHouse database on the
session's ClickHouse service and its own Pulsar tenants (``<tenant>-<suffix>``), and runs the job
exactly as a user does (``python -m widehouse stream ...``).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.integration.pulsar_support import send_exact
from tests.support import json_of_python
from widehouse.catalog import Catalog, load_catalog
from widehouse.generator.manifest import Manifest, diff_rows
from widehouse.generator.options import GenerateOptions
from widehouse.generator.run import generate
from widehouse.planner import TopicTraffic, plan, save_plan
from widehouse.pulsar import PulsarAdmin
from widehouse.pulsar import client as pulsar_client
from widehouse.settings import PlannerSettings, Settings, load_settings
from widehouse.testing import stream_command

STREAM_TIMEOUT = 900


@dataclass
class Deployment:
    """An isolated Widehouse deployment for one test."""

    root: Path
    suffix: str = field(default_factory=lambda: "t" + uuid.uuid4().hex[:7])
    schemas_dir: Path | None = None
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def env(self) -> dict[str, str]:
        env = {
            **os.environ,
            "WIDEHOUSE_STATE_DIR": str(self.root / "state"),
            "WIDEHOUSE_TENANT_SUFFIX": self.suffix,
            "WIDEHOUSE_SPARK_MASTER": "local[2]",
            "WIDEHOUSE_SPARK_SHUFFLE_PARTITIONS": "2",
            "WIDEHOUSE_STREAM_TRIGGER_SECONDS": "1",
            "WIDEHOUSE_STREAM_STOP_GRACE_SECONDS": "60",
            # every deployment shares the session's ClickHouse service: its own database isolates it
            "WIDEHOUSE_CLICKHOUSE_DATABASE": f"wh_{self.suffix}",
            **self.extra_env,
        }
        if self.schemas_dir is not None:
            env["WIDEHOUSE_SCHEMAS_DIR"] = str(self.schemas_dir)
        return env

    @property
    def settings(self) -> Settings:
        return load_settings(self.env)

    @property
    def catalog(self) -> Catalog:
        return load_catalog(self.settings.schemas_dir).relocated(self.suffix)

    @property
    def plan_path(self) -> Path:
        return self.root / "plan.json"

    def publish(self, count: int, seed: int = 1, topics: str | None = None, **options: Any) -> Manifest:
        """Publish generated traffic to this deployment's topics (created as needed)."""
        return generate(
            self.settings,
            GenerateOptions(
                count=count,
                rate=0,
                seed=seed,
                users=200,
                tenant_suffix=self.suffix,
                create_topics=True,
                topics=topics,
                **options,
            ),
        )

    def publish_messages(self, messages: Iterable[tuple[str, str | None, bytes, int | None]]) -> list[str]:
        """Publish exact (catalog topic, key, payload, event ms) messages, in order, to this deployment's
        copies of the topics (created with the catalog's partition counts as needed); returns their
        message ids. The broker stamps the publish times."""
        topics = {t.origin: t for t in self.catalog.topics}
        relocated = []
        for topic, key, payload, event_ms in messages:
            if topic not in topics:
                raise ValueError(f"{topic} is not a topic of the catalog in {self.settings.schemas_dir}")
            relocated.append((str(topics[topic].name), key, payload, event_ms))
        with PulsarAdmin(self.settings.pulsar) as admin:
            for used in {name for name, *_ in relocated}:
                described = next(t for t in topics.values() if str(t.name) == used)
                admin.ensure_partitions(described.name, described.traffic.partitions)
        client = pulsar_client.connect(self.settings.pulsar)
        try:
            return send_exact(client, relocated)
        finally:
            client.close()

    @property
    def topic_origins(self) -> dict[str, str]:
        """This deployment's topic names (as the sinks' ``topic`` columns hold them) -> the catalog's."""
        return {str(t.name): t.origin for t in self.catalog.topics}

    def plan_groups(self, groups: int = 2, topics: list[str] | None = None) -> list[list[str]]:
        """A plan with ``groups`` slot groups over the (relocated) catalog's topics."""
        names = topics or [str(t.name) for t in self.catalog.topics]
        traffic = [TopicTraffic(t, 100.0, 10_000.0) for t in names]
        load = sum(t.load(PlannerSettings()) for t in traffic)
        settings = PlannerSettings(slot_capacity=load / groups / 0.8 * 1.05, target_fill=0.8, isolation=0.8)
        the_plan = plan(traffic, settings)
        save_plan(the_plan, self.plan_path)
        return [list(g.topics) for g in the_plan.groups]

    # -- the job -----------------------------------------------------------------------------
    def stream(self, *args: str, timeout: float = STREAM_TIMEOUT) -> subprocess.CompletedProcess[str]:
        """Run ``widehouse stream --plan <plan> --all-groups --available-now ARGS`` to its end."""
        command = stream_command(self.plan_path, "--available-now", *args)
        process = subprocess.Popen(
            command,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            out, _ = process.communicate(timeout=timeout)
        finally:
            _kill_group(process.pid)  # a SIGKILLed driver must not leave its JVM behind
        return subprocess.CompletedProcess(command, process.returncode, out, "")

    def start_stream(self, *args: str) -> subprocess.Popen[str]:
        """Start the job with a processing-time trigger (the caller stops it)."""
        command = stream_command(self.plan_path, *args)
        log = (self.root / f"stream-{time.time_ns()}.log").open("w")
        return subprocess.Popen(
            command, env=self.env, stdout=log, stderr=subprocess.STDOUT, text=True, start_new_session=True
        )

    def committed_batches(self, group: str) -> list[int]:
        commits = Path(self.settings.stream.checkpoint(group)) / "commits"
        return sorted(int(p.name) for p in commits.glob("[0-9]*")) if commits.is_dir() else []

    # -- read back ---------------------------------------------------------------------------
    def clickhouse(self, sql: str) -> list[dict[str, Any]]:
        """Rows of a ClickHouse query in this deployment (through a subprocess), timestamps as epoch ms."""
        code = (
            "import sys, json, datetime as dt\n"
            "from widehouse import clickhouse\n"
            "from widehouse.settings import load_settings\n"
            "c = clickhouse.connect(load_settings().clickhouse)\n"
            "def ms(v):\n"
            "    if isinstance(v, dt.datetime):\n"
            "        return round((v if v.tzinfo else v.replace(tzinfo=dt.UTC)).timestamp() * 1000)\n"
            "    if isinstance(v, dt.date):\n"
            "        return round(dt.datetime(v.year, v.month, v.day, tzinfo=dt.UTC).timestamp() * 1000)\n"
            "    if isinstance(v, bytes):\n"
            "        return v.decode('latin-1')\n"
            "    return v\n"
            "rows = [{k: ms(v) for k, v in r.items()} for r in c.query(sys.stdin.read()).named_results()]\n"
            "print(json.dumps(rows))\n"
        )
        return list(json_of_python(["-c", code], self.env, stdin=sql))

    def clickhouse_rows(self, table: str) -> dict[tuple[Any, int], dict[str, Any]]:
        wide = self.catalog.table(table)
        rows = self.clickhouse(f"SELECT * FROM {table}_merged")
        return {(r[wide.key_name], r[wide.grain]): r for r in rows}

    def delta_rows(self, spark: Any, table: str) -> dict[tuple[Any, Any], dict[str, Any]]:
        from widehouse.stream.spark.readback import merged_rows

        wide = self.catalog.table(table)
        frame = merged_rows(spark, self.catalog, self.settings.delta, table)
        return {(r[wide.key_name], r[wide.grain]): r.asDict() for r in frame.collect()}

    def assert_sinks_match(
        self, spark: Any, expected: dict[str, dict[tuple[Any, int], dict[str, Any]]]
    ) -> None:
        """ClickHouse and Delta both hold exactly the expected rows of every wide table."""
        for table, rows in expected.items():
            assert diff_rows(rows, self.clickhouse_rows(table)) == [], f"clickhouse {table}"
            assert diff_rows(rows, self.delta_rows(spark, table)) == [], f"delta {table}"


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def expected(manifest: Manifest) -> dict[str, dict[tuple[Any, int], dict[str, Any]]]:
    return {table: manifest.expected_rows(table) for table in manifest.tables()}


GIFT = "persistent://bigolive/live/gift_send"
"""The catalog's gift topic (relocate with :attr:`Deployment.topic_origins`)."""


def gift_message(uid: int, ts: int, diamonds: int) -> tuple[str, str, bytes, int]:
    """A hand-written ``gift_send`` message for :meth:`Deployment.publish_messages`: one gift of
    ``diamonds`` (gifts_sent +1, gift_diamonds_sent +diamonds)."""
    gift = {"id": 7, "name": "rose", "diamonds": diamonds, "is_lucky": False}
    payload = {"uid": uid, "ts": ts, "room_id": 100001, "anchor_uid": 10000001, "gift": gift, "count": 1}
    return GIFT, str(uid), json.dumps(payload).encode(), ts

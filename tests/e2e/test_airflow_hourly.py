"""Hours finalized by the real Airflow scheduler: the hourly DAG's gate, a backfill, a re-finalize.

One deployment whose catalog copy has a lateness computed so that its generated traffic (event
times in the hour before the current one, ``base_time_ms``) is on time *and* the watermark can
pass that hour's end + lateness under three minutes later (the generator's timing margin is lowered
for its small unpaced batch): the gate passes legitimately, nothing is forced. The hourly DAG
starts two hours before that hour (``WIDEHOUSE_AIRFLOW_START``), so its catchup runs cover three
hours: two with only hand-written late logins, one with the generated traffic. Expected rows come
from the generator's manifest and from hand-written values. The tests that need no real-time wait
(backfill, re-finalize) come first, while that time passes; the gate's test comes last.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.e2e.airflow_support import AirflowApi, parse_time
from tests.integration.stream_support import Deployment
from widehouse.contracts.tables import LEDGER
from widehouse.generator.manifest import Manifest, diff_rows, normalize
from widehouse.settings import Settings

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).parents[2]
PORTS = {  # not test_airflow's: both modules may run on the shared box at once
    "WIDEHOUSE_AIRFLOW_PORT": "18180",
    "WIDEHOUSE_AIRFLOW_WORKER_LOG_PORT": "18893",
    "WIDEHOUSE_AIRFLOW_TRIGGERER_LOG_PORT": "18894",
}
HOUR = dt.timedelta(hours=1)
HOUR_MS = 3_600_000
MAX_DELAY_MS = 5_000
TIMING_MARGIN_MS = 60_000
"""The publishing lag the generator allows for (its default, 5 min, is for long paced runs; 1,500
messages sent at once take a second or two). The gate is that much sooner, and the test waits less."""
SLACK_S = 30
"""From ``now`` in the fixture to the publisher's start (catalog copy, topic creation): the manifest
stays exact if those and the sending take less (the generator refuses a base time further behind now
than lateness - max delay - timing margin; its exactness allows lateness - 1 min). Measured: 1.4 s
(the fixture prints it); every second of it is a second the gate's test sleeps."""
LOGIN = "persistent://bigolive/app/login"
LATE_UID = 999_001
TICK_UID = 999_002
DAG = "widehouse_hourly"


@dataclass
class Hours:
    """The streamed deployment and its hours: ``data`` (generated traffic), two earlier ones."""

    deployment: Deployment
    manifest: Manifest
    data: dt.datetime
    needed: dt.datetime
    """The gate of ``data``: hour end + lateness."""

    @property
    def first(self) -> dt.datetime:
        return self.data - 3 * HOUR

    @property
    def late_hour(self) -> dt.datetime:
        return self.data - HOUR

    @property
    def backfilled(self) -> list[dt.datetime]:
        """Three hours before the DAG's start: only the backfill runs them."""
        return [self.first, self.first + HOUR, self.late_hour]

    def want(self, hour: dt.datetime) -> dict[tuple[Any, Any], dict[str, Any]]:
        ms = _ms(hour)
        return {k: r for k, r in self.manifest.expected_rows("user_hourly").items() if k[1] == ms}

    def view_rows(self, hour: dt.datetime) -> dict[tuple[Any, Any], dict[str, Any]]:
        rows = self.deployment.clickhouse(
            f"SELECT * FROM user_hourly WHERE hour = toDateTime({_ms(hour) // 1000}, 'UTC')"
        )
        return {(r["uid"], r["hour"]): r for r in rows}

    def ledger(self, hour: dt.datetime) -> list[dict[str, Any]]:
        if not self.deployment.clickhouse(f"EXISTS TABLE {LEDGER}")[0]["result"]:
            return []  # no finalize ran yet
        return self.deployment.clickhouse(
            f"SELECT * FROM {LEDGER} WHERE `table` = 'user_hourly' "
            f"AND period = toDateTime64({_ms(hour) // 1000}, 3, 'UTC') ORDER BY finalized_at"
        )


def _ms(moment: dt.datetime) -> int:
    return int(moment.timestamp() * 1000)


def _login(uid: int, ts: int, result: str, version: str, country: str) -> bytes:
    body = {"uid": uid, "ts": ts, "method": "phone", "result": result, "app_version": version}
    return orjson.dumps({**body, "latency_ms": 100, "retry": 0, "geo": {"country": country}})


@pytest.fixture(scope="module")
def hours(tmp_path_factory: pytest.TempPathFactory, services: Settings) -> Hours:
    root = tmp_path_factory.mktemp("airflow-hourly")
    now = time.time()
    current = dt.datetime.fromtimestamp(now, dt.UTC).replace(minute=0, second=0, microsecond=0)
    data = current - HOUR
    base_ms = _ms(current) - 10_000  # good events in [base - 5 s, base]: the end of `data`
    lateness_s = math.ceil(now - base_ms / 1000) + (MAX_DELAY_MS + TIMING_MARGIN_MS) // 1000 + SLACK_S
    schemas = root / "schemas"
    shutil.copytree(ROOT / "schemas", schemas)
    (root / "sql").symlink_to(ROOT / "sql")  # the offline columns' Hive SQL, next to the catalog
    catalog = schemas / "catalog.yaml"
    text = catalog.read_text()
    assert "lateness: 1h" in text
    catalog.write_text(text.replace("lateness: 1h", f"lateness: {lateness_s}s"))

    deployment = Deployment(root, schemas_dir=schemas)
    conns = json.loads((ROOT / "docker" / "airflow" / "dev-connections.json").read_text())
    conns["widehouse_clickhouse"]["schema"] = f"wh_{deployment.suffix}"
    (root / "connections.json").write_text(json.dumps(conns))
    deployment.extra_env.update(
        {
            **PORTS,
            "WIDEHOUSE_AIRFLOW_CONNECTIONS_FILE": str(root / "connections.json"),
            "WIDEHOUSE_AIRFLOW_START": data.isoformat(),
        }
    )
    manifest = deployment.publish(
        1500,
        seed=11,
        base_time_ms=base_ms,
        max_delay_ms=MAX_DELAY_MS,
        timing_margin_ms=TIMING_MARGIN_MS,
        late_rate=0,
    )
    assert manifest.data["run"]["exact"], manifest.data["run"]
    used_s = manifest.data["run"]["started_ms"] / 1000 - now + manifest.data["run"]["elapsed_s"]
    print(f"now -> publishing done: {used_s:.1f}s of the {SLACK_S}s slack")
    # two late logins of a user the generator never uses, in the hour before `data` (2 h+ behind)
    late = [(5, "success", "5.40.0", "VN"), (10, "wrong_password", "5.39.1", "TH")]
    deployment.publish_messages(
        (LOGIN, str(LATE_UID), _login(LATE_UID, ts, *rest), ts)
        for ts, *rest in ((_ms(data - HOUR) + m * 60_000, *r) for m, *r in late)
    )
    deployment.plan_groups(groups=1)
    deployment.settings.state_dir.mkdir(parents=True, exist_ok=True)
    (deployment.settings.state_dir / "plan.json").write_text(deployment.plan_path.read_text())
    run = deployment.stream()
    assert run.returncode == 0, run.stdout[-5000:]
    needed = data + HOUR + dt.timedelta(seconds=lateness_s)
    return Hours(deployment, manifest, data, needed)


@pytest.fixture(scope="module")
def airflow(hours: Hours) -> Iterator[AirflowApi]:
    env = hours.deployment.env
    cli = [sys.executable, "-m", "widehouse", "airflow"]
    up = subprocess.run([*cli, "up"], env=env, capture_output=True, text=True, timeout=900, check=False)
    try:
        assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
        settings = hours.deployment.settings
        yield AirflowApi(settings.airflow.url, settings.airflow.user, settings.airflow.password)
    finally:
        subprocess.run([*cli, "down"], env=env, timeout=300, check=False)


def test_a_backfill_over_three_hours_finalizes_them(hours: Hours, airflow: AirflowApi) -> None:
    assert all(hours.ledger(h) == [] for h in hours.backfilled)
    airflow.wait_dag(DAG)  # a paused DAG runs no backfill; its catchup run of the data hour waits
    started = time.monotonic()
    create = subprocess.run(  # the README's command
        [
            sys.executable,
            "-m",
            "widehouse",
            "airflow",
            "backfill",
            "--dag-id",
            DAG,
            "--from-date",
            hours.first.isoformat(),
            "--to-date",
            hours.late_hour.isoformat(),
        ],
        env=hours.deployment.env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert create.returncode == 0, create.stdout[-3000:] + create.stderr[-3000:]
    deadline = time.monotonic() + 2400
    while True:
        runs = [r for r in airflow.runs(DAG) if r["run_type"] == "backfill"]
        if len(runs) == 3 and all(r["state"] in ("success", "failed") for r in runs):
            break
        assert time.monotonic() < deadline, runs
        time.sleep(10)
    print(f"backfill of three hours: {time.monotonic() - started:.0f}s")
    assert sorted(parse_time(r["logical_date"]) for r in runs) == hours.backfilled  # both dates inclusive
    assert {r["state"] for r in runs} == {"success"}
    run_of = {parse_time(r["logical_date"]): r["dag_run_id"] for r in runs}
    for hour in hours.backfilled:  # only late events there (or none): nothing final
        assert [(e["rows"], e["forced"], e["reconciliation"]) for e in hours.ledger(hour)] == [
            (0, False, "ok")
        ]
        assert hours.view_rows(hour) == {}
        # the ledger names the backfill run that published the hour (the view links to it)
        assert [e["airflow_run"] for e in hours.ledger(hour)] == [f"{DAG}/{run_of[hour]}"]


def test_a_manual_refinalize_with_include_late(hours: Hours, airflow: AirflowApi) -> None:
    hour = hours.late_hour
    assert all(key != LATE_UID for key, _ in hours.view_rows(hour))
    airflow.wait_dag("widehouse_refinalize")
    run = airflow.trigger(
        "widehouse_refinalize",
        {"table": "user_hourly", "first_hour": hour.isoformat(), "include_late": True},
    )
    assert airflow.wait_run("widehouse_refinalize", run, timeout=1800) == "success"
    newest = hours.ledger(hour)[-1]
    assert (newest["include_late"], newest["late_rows"], newest["forced"]) == (True, 2, False)
    assert newest["airflow_run"] == f"widehouse_refinalize/{run}"  # not the hour's hourly run
    want = {
        "logins": 1,
        "login_failures": 1,
        "first_login_at": _ms(hour) + 5 * 60_000,
        "last_login_at": _ms(hour) + 10 * 60_000,
        "last_app_version": "5.40.0",  # the last success
        "last_country": "TH",  # the last attempt
    }
    row = hours.view_rows(hour)[(LATE_UID, _ms(hour))]
    assert {k: normalize(row[k]) for k in want} == want


def test_the_manual_repair_runs_from_its_form(hours: Hours, airflow: AirflowApi) -> None:
    """The ``widehouse_repair`` DAG wired to ``widehouse repair``: with the catalog unchanged every
    quarantined message of the range stays invalid, each recorded once with its reason."""
    now_hour = dt.datetime.now(dt.UTC).replace(minute=0, second=0, microsecond=0)
    first = now_hour - HOUR
    topics = ", ".join(f"'{t.name}'" for t in hours.deployment.catalog.topics_for("user_hourly"))
    stored = hours.deployment.clickhouse(
        "SELECT uniqExact(topic, message_id) AS n FROM quarantine WHERE NOT startsWith(message_id, 'merge:') "
        f"AND topic IN ({topics}) AND publish_time >= toDateTime64({_ms(first) // 1000}, 3, 'UTC')"
    )[0]["n"]
    assert stored > 0  # the generator's bad events
    airflow.wait_dag("widehouse_repair")
    conf = {"table": "user_hourly", "first_hour": first.isoformat(), "last_hour": now_hour.isoformat()}
    run = airflow.trigger("widehouse_repair", conf)
    assert airflow.wait_run("widehouse_repair", run, timeout=900) == "success"
    assert " 0 repaired" in airflow.task_log("widehouse_repair", run, "repair")
    recorded = hours.deployment.clickhouse(
        "SELECT outcome, count() AS n, uniqExact(topic, message_id) AS messages FROM repairs GROUP BY outcome"
    )
    assert recorded == [{"outcome": "invalid", "n": stored, "messages": stored}]


def test_the_hourly_dag_finalizes_the_hour_once_the_watermark_passes(
    hours: Hours, airflow: AirflowApi
) -> None:
    want = hours.want(hours.data)
    assert want and {h for _, h in hours.manifest.expected_rows("user_hourly")} == {_ms(hours.data)}
    airflow.wait_dag(DAG)  # unpaused: catchup runs from the start setting (the data hour), one per hour
    airflow.run_for(DAG, hours.data)
    # the watermark is not there yet, however late this runs: it moves only with a stream's batch
    assert hours.ledger(hours.data) == []

    # the streams' next batch after hour end + lateness moves the watermark past it
    wait_s = max(0.0, (hours.needed - dt.datetime.now(dt.UTC)).total_seconds() + 15)
    print(f"the gate's time is {wait_s:.0f}s away")  # what is left after the other tests
    time.sleep(wait_s)
    tick_ms = int(time.time() * 1000)
    hours.deployment.publish_messages(
        [(LOGIN, str(TICK_UID), _login(TICK_UID, tick_ms, "success", "5.40.0", "VN"), tick_ms)]
    )
    run = hours.deployment.stream()
    assert run.returncode == 0, run.stdout[-5000:]
    passed = hours.deployment.clickhouse(
        "SELECT toUnixTimestamp64Milli(min(committed_at)) AS at FROM stream_progress "
        f"WHERE topic = '*' AND watermark >= toDateTime64({_ms(hours.needed) / 1000}, 3, 'UTC')"
    )[0]["at"]
    assert passed, "the stream committed no watermark past the hour"

    done = airflow.run_for(DAG, hours.data)
    assert airflow.wait_run(DAG, done["dag_run_id"], timeout=1800) == "success"
    entries = hours.ledger(hours.data)
    assert [(e["forced"], e["include_late"], e["reconciliation"]) for e in entries] == [(False, False, "ok")]
    assert entries[0]["airflow_run"] == f"{DAG}/{done['dag_run_id']}"
    assert entries[0]["rows"] == len(want)
    assert diff_rows(want, hours.view_rows(hours.data)) == []
    latency = entries[0]["finalized_at"] / 1000 - passed / 1000
    print(f"watermark past {hours.data:%H}:00 end + lateness -> hour finalized: {latency:.1f}s")

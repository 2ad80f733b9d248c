"""Finalizing hours against the real services: Pulsar, the stream, the ClickHouse service, Delta.

One deployment is streamed once (generated traffic, whose manifest holds the exact expected rows,
plus two hand-made late events); the tests then finalize its hours as a user does
(``python -m widehouse finalize``), and read both stores back:

- the watermark gate refuses an hour the streams have not passed, and ``--force`` is recorded;
- the final rows equal the manifest's in ClickHouse (analyst view) and in silver Delta, the
  same after a second run and after SIGKILLs between the publish steps (staged, prepared, Delta
  committed), healed by a re-run that the gate then stops;
- of two concurrent publishers of an hour exactly one publishes; the other is refused (exit 5);
- ``--include-late`` folds the hand-made late events into the hand-written row;
- reconciliation catches a message on the broker that the stream never counted;
- ``widehouse repair`` folds quarantined events the fixed catalog accepts, exactly once across a
  crash and a second run, and re-publishes their hour (last: it adds a row to the current hour).
"""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import time
from typing import Any

import orjson
import pytest

from tests.integration.stream_support import Deployment
from widehouse.contracts.tables import LEDGER, RECONCILIATION
from widehouse.generator.manifest import Manifest, diff_rows, normalize
from widehouse.settings import Settings

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]

HOUR_MS = 3_600_000
LATE_UID = 999_001
REPAIR_UID = 999_002


def _hour_text(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%dT%H")


def _repair_login(ts: int, result: str, latency: float, retry: float, country: str) -> bytes:
    return orjson.dumps(
        {
            "uid": REPAIR_UID,
            "ts": ts,
            "method": "phone",
            "result": result,
            "app_version": "5.40.0",
            "latency_ms": latency,
            "retry": retry,
            "geo": {"country": country},
        }
    )


def _clear_of_hour_end() -> int:
    """Now (epoch ms), after waiting out the last 30 s of an hour: a test that publishes next and reads
    the messages back at their publish hour never straddles an hour's end."""
    now = int(time.time() * 1000)
    if HOUR_MS - now % HOUR_MS < 30_000:
        time.sleep((HOUR_MS - now % HOUR_MS) / 1000 + 0.1)
        now = int(time.time() * 1000)
    return now


def _repair_t0() -> int:
    """The repair logins' event time, taken just before they are published (event hour = publish hour)."""
    now = _clear_of_hour_end()
    return max(now // HOUR_MS * HOUR_MS, now - 1000)


def _too_strict(t0: int) -> list[bytes]:
    """Three logins the catalog quarantines (``latency_ms`` is declared int, they send a float): after
    the fix (double) the first two are valid, the third still is not (a float ``retry``)."""
    return [
        _repair_login(t0, "success", 250.5, 0, "ID"),
        _repair_login(t0 + 500, "timeout", 99.9, 1, "PK"),
        _repair_login(t0 + 700, "success", 300.5, 1.5, "VN"),
    ]


class Streamed:
    def __init__(self, deployment: Deployment, manifest: Manifest, late_hour_ms: int, repair_t0: int) -> None:
        self.deployment = deployment
        self.manifest = manifest
        self.late_hour_ms = late_hour_ms
        self.repair_t0 = repair_t0  # the event time of the first repair login
        self.unread_hour: int | None = None  # the hour a test adds a message the stream never reads
        rows = manifest.expected_rows("user_hourly")
        by_hour: dict[int, dict[Any, Any]] = {}
        for (key, hour), row in rows.items():
            by_hour.setdefault(hour, {})[(key, hour)] = row
        # the busiest hours of the traffic (within 2 h of now: not final by the gate)
        self.hours = sorted(by_hour, key=lambda h: len(by_hour[h]), reverse=True)[:2]
        self.rows = by_hour

    def command(self, hour_ms: int, *args: str) -> list[str]:
        command = [sys.executable, "-m", "widehouse", "finalize", "--table", "user_hourly"]
        return [*command, "--hour", _hour_text(hour_ms), "--no-hbase", *args]

    def finalize(self, hour_ms: int, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.command(hour_ms, *args),
            env=self.deployment.env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )

    def prepared(self, hour_ms: int) -> list[int]:
        """``finalized_at`` (epoch ms) of the hour's prepared publications, oldest first."""
        if not self.deployment.clickhouse("EXISTS TABLE publications")[0]["result"]:
            return []  # no run got as far as creating it
        rows = self.deployment.clickhouse(
            "SELECT toUnixTimestamp64Milli(finalized_at) AS f FROM publications "
            f"WHERE `table` = 'user_hourly' AND period = toDateTime64({hour_ms // 1000}, 3, 'UTC') "
            "ORDER BY finalized_at"
        )
        return [int(r["f"]) for r in rows]

    def delta_txn(self, hour_ms: int) -> int | None:
        """The newest publication Delta's log recorded for the hour (read by delta-rs, not Spark)."""
        import deltalake

        path = self.deployment.settings.delta.path("silver", "user_hourly")
        app_id = f"widehouse-publish:user_hourly:{_hour_text(hour_ms)}:00Z"
        try:
            version = deltalake.DeltaTable(path).transaction_version(app_id)
        except deltalake.exceptions.TableNotFoundError:
            return None
        return None if version is None else int(version)

    def view_rows(self, hour_ms: int) -> dict[tuple[Any, Any], dict[str, Any]]:
        rows = self.deployment.clickhouse(
            f"SELECT * FROM user_hourly WHERE hour = toDateTime({hour_ms // 1000}, 'UTC')"
        )
        return {(r["uid"], r["hour"]): r for r in rows}

    def silver_rows(self, spark: Any, hour_ms: int) -> dict[tuple[Any, Any], dict[str, Any]]:
        from pyspark.sql import functions as F  # noqa: N812

        path = self.deployment.settings.delta.path("silver", "user_hourly")
        frame = (
            spark.read.format("delta").load(path).where(F.col("hour") == F.timestamp_millis(F.lit(hour_ms)))
        )
        return {
            (normalize(r["uid"]), normalize(r["hour"])): {k: normalize(v) for k, v in r.asDict().items()}
            for r in frame.collect()
        }

    def ledger(self, hour_ms: int) -> list[dict[str, Any]]:
        return self.deployment.clickhouse(
            f"SELECT *, toUnixTimestamp64Milli(finalized_at) AS finalized_ms FROM {LEDGER} "
            f"WHERE `table` = 'user_hourly' AND period = toDateTime64({hour_ms // 1000}, 3, 'UTC') "
            "ORDER BY finalized_at"
        )

    def both_stores_equal(self, spark: Any, hour_ms: int) -> None:
        """Both stores hold the manifest's rows of the hour, from the ledger's newest publication."""
        want = self.rows[hour_ms]
        view = self.view_rows(hour_ms)
        assert len(view) == len(want) and diff_rows(want, view) == []  # one version visible
        silver = self.silver_rows(spark, hour_ms)
        assert len(silver) == len(want) and diff_rows(want, silver) == []
        newest = self.ledger(hour_ms)[-1]["finalized_ms"]
        assert {r["finalized_at"] for r in silver.values()} == {newest}
        assert self.delta_txn(hour_ms) == newest


@pytest.fixture(scope="module")
def streamed(services: Settings, tmp_path_factory: pytest.TempPathFactory) -> Streamed:
    deployment = Deployment(tmp_path_factory.mktemp("finalize"))
    manifest = deployment.publish(1500, seed=5)
    # two late logins of a user the generator never uses, 3 h behind their publish time (lateness 1 h)
    late_hour = (int(time.time() * 1000) - 3 * HOUR_MS) // HOUR_MS * HOUR_MS
    late = [
        (late_hour + 5 * 60_000, "success", "5.40.0", "VN"),
        (late_hour + 10 * 60_000, "wrong_password", "5.39.1", "TH"),
    ]
    payloads = [
        orjson.dumps(
            {
                "uid": LATE_UID,
                "ts": ts,
                "method": "phone",
                "result": result,
                "app_version": version,
                "latency_ms": 100,
                "retry": 0,
                "geo": {"country": country},
            }
        )
        for ts, result, version, country in late
    ]
    deployment.publish_messages(
        ("persistent://bigolive/app/login", str(LATE_UID), p, ts)
        for p, (ts, *_) in zip(payloads, late, strict=True)
    )
    repair_t0 = _repair_t0()
    deployment.publish_messages(
        ("persistent://bigolive/app/login", str(REPAIR_UID), p, None) for p in _too_strict(repair_t0)
    )
    deployment.plan_groups(2)
    run = deployment.stream()
    assert run.returncode == 0, run.stdout[-5000:]
    return Streamed(deployment, manifest, late_hour, repair_t0)


def test_refused_before_the_watermark_then_forced_and_recorded(streamed: Streamed, spark: Any) -> None:
    hour = streamed.hours[0]
    refused = streamed.finalize(hour)
    assert refused.returncode == 3, refused.stderr[-3000:]
    assert "is not final yet" in refused.stderr and "lagging" in refused.stderr
    assert streamed.ledger(hour) == []  # nothing published
    assert "SparkContext" not in refused.stderr  # a refused run starts no Spark

    forced = streamed.finalize(hour, "--force")
    assert forced.returncode == 0, forced.stderr[-5000:]
    entries = streamed.ledger(hour)
    assert [(e["forced"], e["kind"], e["reconciliation"]) for e in entries] == [(True, "hour", "ok")]
    assert "forced:" in entries[0]["note"]
    want = streamed.rows[hour]
    assert entries[0]["rows"] == len(want)
    assert diff_rows(want, streamed.view_rows(hour)) == []
    assert diff_rows(want, streamed.silver_rows(spark, hour)) == []


def test_silver_is_in_the_spark_catalog_and_plain_delta(streamed: Streamed, spark: Any) -> None:
    """``spark.table("widehouse.user_hourly")`` and delta-rs (no Spark) read the published hour."""
    import deltalake
    import pyarrow.compute as pc

    from widehouse.batch.spark import register, silver_path

    hour = streamed.hours[0]
    if not streamed.ledger(hour):
        assert streamed.finalize(hour, "--force").returncode == 0
    want = streamed.rows[hour]
    delta = streamed.deployment.settings.delta
    register(spark, delta, "user_hourly")  # what every publish does, here in the test's own metastore
    from pyspark.sql import functions as F  # noqa: N812

    frame = spark.table("widehouse.user_hourly").where(F.col("hour") == F.timestamp_millis(F.lit(hour)))
    assert {(r["uid"], normalize(r["hour"])) for r in frame.collect()} == set(want)
    table = deltalake.DeltaTable(silver_path(delta, "user_hourly")).to_pyarrow_table()
    hour_rows = table.filter(pc.equal(pc.cast(table["hour"], "int64"), hour * 1000))
    rows = {(r["uid"], normalize(r["hour"])): r for r in hour_rows.to_pylist()}
    assert diff_rows(want, rows) == []


def test_kills_between_publish_steps_then_a_rerun_the_gate_stops_heals_both_stores(
    streamed: Streamed, spark: Any
) -> None:
    hour = streamed.hours[-1]  # the busiest hour may already be published (the ledger tells)
    before = len(streamed.ledger(hour))
    prepared = streamed.prepared(hour)
    delta_before = streamed.delta_txn(hour)

    # staged in <T>_final, not prepared: nothing decided, nothing visible, nothing to roll forward
    killed = streamed.finalize(hour, "--force", "--fault", "after-final")
    assert killed.returncode == -9, killed.stderr[-3000:]
    assert len(streamed.ledger(hour)) == before and streamed.prepared(hour) == prepared
    versions = streamed.deployment.clickhouse(
        "SELECT finalized_at, count() AS n FROM user_hourly_final "
        f"WHERE hour = toDateTime({hour // 1000}, 'UTC') GROUP BY finalized_at"
    )
    want = streamed.rows[hour]
    assert len(want) in {v["n"] for v in versions}  # the killed run's version is there, hidden:
    view = streamed.view_rows(hour)
    assert len(view) == len(want) and diff_rows(want, view) == []  # (live rows or an older version)

    # prepared (decided), killed before Delta: still nothing visible
    killed = streamed.finalize(hour, "--force", "--fault", "after-prepare")
    assert killed.returncode == -9, killed.stderr[-3000:]
    decided = streamed.prepared(hour)[-1]
    assert len(streamed.prepared(hour)) == len(prepared) + 1
    assert len(streamed.ledger(hour)) == before and streamed.delta_txn(hour) == delta_before

    # the next run first rolls that publication forward; killed right after its Delta commit, the
    # stores disagree (Delta has it, the ledger does not yet)
    killed = streamed.finalize(hour, "--force", "--fault", "after-silver")
    assert killed.returncode == -9, killed.stderr[-3000:]
    assert streamed.delta_txn(hour) == decided
    assert len(streamed.ledger(hour)) == before

    # a run the gate stops (no --force: the hour is not final) still heals that first
    refused = streamed.finalize(hour)
    assert refused.returncode == 3, refused.stderr[-3000:]
    entries = streamed.ledger(hour)
    assert len(entries) == before + 1 and entries[-1]["finalized_ms"] == decided
    streamed.both_stores_equal(spark, hour)

    done = streamed.finalize(hour, "--force")
    assert done.returncode == 0, done.stderr[-5000:]
    assert len(streamed.ledger(hour)) == before + 2
    streamed.both_stores_equal(spark, hour)


def test_of_two_concurrent_publishers_one_publishes_the_other_is_refused(
    streamed: Streamed, spark: Any
) -> None:
    hour = streamed.hours[0]
    before = len(streamed.ledger(hour))
    runs = [
        subprocess.Popen(
            streamed.command(hour, "--force"),
            env=streamed.deployment.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    results = [(run.wait(timeout=600), run.communicate()[1]) for run in runs]
    assert sorted(code for code, _ in results) == [0, 5], [err[-3000:] for _, err in results]
    busy = next(err for code, err in results if code == 5)
    assert f"period {_hour_text(hour)}:00Z of user_hourly is being published by run" in busy
    assert len(streamed.ledger(hour)) == before + 1
    streamed.both_stores_equal(spark, hour)


def test_include_late_folds_the_hours_late_events(streamed: Streamed, spark: Any) -> None:
    hour = streamed.late_hour_ms
    plain = streamed.finalize(hour, "--force")
    assert plain.returncode == 0, plain.stderr[-5000:]
    assert all(key != LATE_UID for key, _ in streamed.view_rows(hour))

    folded = streamed.finalize(hour, "--force", "--include-late")
    assert folded.returncode == 0, folded.stderr[-5000:]
    # the two hand-made late logins, plus any late event of the table's topics the generator put here
    import re

    match = re.search(r"late events folded: (\d+) ", folded.stdout)
    assert match is not None, folded.stdout
    newest = streamed.ledger(hour)[-1]
    assert int(match.group(1)) >= 2
    assert (newest["include_late"], newest["late_rows"]) == (True, int(match.group(1)))
    want = {
        "logins": 1,
        "login_failures": 1,
        "first_login_at": hour + 5 * 60_000,
        "last_login_at": hour + 10 * 60_000,
        "last_app_version": "5.40.0",  # the last success
        "last_country": "TH",  # the last attempt
    }
    for rows in (streamed.view_rows(hour), streamed.silver_rows(spark, hour)):
        row = rows[(LATE_UID, hour)]
        assert {k: normalize(row[k]) for k in want} == want


def test_reconciliation_catches_a_message_the_stream_did_not_count(streamed: Streamed) -> None:
    from tests.integration.pulsar_support import send_exact
    from widehouse.pulsar import client as pulsar_client

    deployment = streamed.deployment
    counted = deployment.clickhouse(
        "SELECT toUnixTimestamp(publish_hour) * 1000 AS hour, sum(rows_in) AS n FROM stream_counts FINAL "
        "GROUP BY hour ORDER BY hour"
    )
    # + the two late logins and the three logins the repair test needs
    sent = streamed.manifest.counts().sent + 2 + len(_too_strict(streamed.repair_t0))
    assert sum(r["n"] for r in counted) == sent
    # one more message the stream never reads: the broker holds it, the stream did not count it
    topic = next(
        t for t, origin in deployment.topic_origins.items() if origin == "persistent://bigolive/app/login"
    )
    hour = _clear_of_hour_end() // HOUR_MS * HOUR_MS
    streamed.unread_hour = hour
    client = pulsar_client.connect(deployment.settings.pulsar)
    try:
        send_exact(client, [(topic, "1", b'{"uid": 1}', None)])
    finally:
        client.close()
    published = len(streamed.ledger(hour))  # the traffic's hour may be this one, finalized above
    refused = streamed.finalize(hour, "--force")
    assert refused.returncode == 4, refused.stderr[-3000:]
    assert "on the broker the stream did not count" in refused.stderr and topic in refused.stderr
    assert len(streamed.ledger(hour)) == published  # nothing published
    statuses = deployment.clickhouse(
        f"SELECT topic, status, broker - counted_in AS missing FROM {RECONCILIATION} "
        f"WHERE hour = toDateTime64({hour // 1000}, 3, 'UTC') AND status != 'ok'"
    )
    assert statuses == [{"topic": topic, "status": "mismatch", "missing": 1}]

    accepted = streamed.finalize(hour, "--force", "--accept-mismatch")
    assert accepted.returncode == 0, accepted.stderr[-3000:]
    assert streamed.ledger(hour)[-1]["reconciliation"] == "accepted"


def test_every_other_hour_reconciles(streamed: Streamed) -> None:
    """The hours the stream read completely reconcile topic by topic (broker = counted = stored)."""
    skipped = {int(time.time()) // 3600 * 3600, (streamed.unread_hour or 0) // 1000}
    rows = streamed.deployment.clickhouse(
        "SELECT topic, broker, counted_in, valid + quarantined + late AS stored, status "
        f"FROM {RECONCILIATION} "
        f"WHERE toUnixTimestamp(hour) NOT IN ({', '.join(map(str, sorted(skipped)))})"
    )
    assert rows and all(r["status"] == "ok" for r in rows)
    assert all(r["broker"] == r["counted_in"] == r["stored"] for r in rows)


def test_repair_folds_the_quarantined_events_a_fixed_catalog_accepts_exactly_once(
    streamed: Streamed, spark: Any, tmp_path: Any
) -> None:
    import shutil

    import deltalake
    import pyarrow.compute as pc

    deployment = streamed.deployment
    login = next(t for t, o in deployment.topic_origins.items() if o == "persistent://bigolive/app/login")
    quarantined = deployment.clickhouse(
        "SELECT toUnixTimestamp(toStartOfHour(publish_time)) * 1000 AS hour, reason, detail, message_id "
        "FROM quarantine "
        f"WHERE topic = '{login}' AND position(payload, '\"uid\":{REPAIR_UID}') > 0"
    )
    assert len(quarantined) == 3 and {q["reason"] for q in quarantined} == {"wrong_type"}
    assert all("latency_ms" in q["detail"] for q in quarantined)
    hour = quarantined[0]["hour"]
    assert hour == streamed.repair_t0 // HOUR_MS * HOUR_MS  # event hour = publish hour
    published = streamed.finalize(hour, "--force", "--accept-mismatch")  # another test adds a stray message
    assert published.returncode == 0, published.stderr[-3000:]
    assert all(key != REPAIR_UID for key, _ in streamed.view_rows(hour))
    entries = len(streamed.ledger(hour))

    # the catalog fix: latency_ms is a double
    fixed = tmp_path / "schemas"
    shutil.copytree(deployment.settings.schemas_dir, fixed)
    shutil.copytree(deployment.settings.schemas_dir.parent / "sql", tmp_path / "sql")  # the offline SQL
    login_yaml = fixed / "topics" / "bigolive" / "app" / "login.yaml"
    strict = "latency_ms: {type: int, range: [20, 3000]}"
    assert strict in login_yaml.read_text()
    login_yaml.write_text(
        login_yaml.read_text().replace(strict, "latency_ms: {type: double, range: [20, 3000]}")
    )
    env = {**deployment.env, "WIDEHOUSE_SCHEMAS_DIR": str(fixed)}
    hour_arg = _hour_text(hour)
    command = [sys.executable, "-m", "widehouse", "repair", "--table", "user_hourly"]
    command += ["--from", hour_arg, "--to", hour_arg, "--reason", "wrong_type"]

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*command, *extra], env=env, capture_output=True, text=True, timeout=600, check=False
        )

    killed = run("--fault", "after-partials")  # claimed and inserted into ClickHouse, nothing more
    assert killed.returncode == -9, killed.stderr[-3000:]
    assert all(key != REPAIR_UID for key, _ in streamed.view_rows(hour))

    # the next run finishes that chunk (same token: deduplicated), and is killed before re-publishing
    killed = run("--fault", "after-chunk")
    assert killed.returncode == -9, killed.stderr[-3000:]
    assert {r["chunk"] for r in deployment.clickhouse("SELECT chunk FROM repair_chunks")} == {1}
    assert len(streamed.ledger(hour)) == entries and all(
        key != REPAIR_UID for key, _ in streamed.view_rows(hour)
    )

    done = run()  # nothing left to fold: re-publishes the hour the done chunk touched
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert " 0 repaired" in done.stdout and "re-published: user_hourly" in done.stdout
    assert "still quarantined by reason: wrong_type" in done.stdout
    assert len(streamed.ledger(hour)) == entries + 1  # the hour re-published, with its flags
    assert streamed.ledger(hour)[-1]["forced"]  # the flags of the publication it replaces
    want = {
        "logins": 1,
        "login_failures": 1,
        "first_login_at": streamed.repair_t0,
        "last_login_at": streamed.repair_t0 + 500,
        "last_app_version": "5.40.0",
        "last_country": "PK",
    }
    for rows in (streamed.view_rows(hour), streamed.silver_rows(spark, hour)):
        assert {k: normalize(rows[(REPAIR_UID, hour)][k]) for k in want} == want

    # the generator's own wrong_type messages of the hour are examined too (some may be valid now)
    mine = ", ".join(f"'{q['message_id']}'" for q in quarantined)
    outcomes = deployment.clickhouse(
        f"SELECT outcome, reason, detail, chunk FROM repairs WHERE message_id IN ({mine}) ORDER BY outcome"
    )
    assert [(o["outcome"], o["chunk"]) for o in outcomes] == [
        ("invalid", 0),
        ("repaired", 1),
        ("repaired", 1),
    ]
    assert outcomes[0]["reason"] == "wrong_type" and "retry" in outcomes[0]["detail"]
    repaired = deployment.clickhouse(
        f"SELECT count() AS n FROM repairs WHERE topic = '{login}' AND outcome = 'repaired' "
        f"AND toStartOfHour(publish_time) = toDateTime({hour // 1000}, 'UTC')"
    )[0]["n"]
    checks = deployment.clickhouse(
        "SELECT valid, quarantined, late, counted_in, repaired FROM reconciliation "
        "WHERE `table` = 'user_hourly' "
        f"AND topic = '{login}' AND hour = toDateTime64({hour // 1000}, 3, 'UTC') ORDER BY checked_at"
    )
    before, after = checks[-2], checks[-1]
    assert repaired >= 2 and after["counted_in"] == before["counted_in"]
    assert (before["repaired"], after["repaired"]) == (0, repaired)
    assert (after["valid"], after["quarantined"]) == (
        before["valid"] + repaired,
        before["quarantined"] - repaired,
    )
    assert after["valid"] + after["quarantined"] + after["late"] == after["counted_in"]

    # Delta holds the repaired partial row once (the crashed run never reached it)
    partials = deltalake.DeltaTable(deployment.settings.delta.path("bronze", "user_hourly_partials"))
    table = partials.to_pyarrow_table()
    mine = table.filter(pc.equal(table["uid"], REPAIR_UID))
    assert mine.num_rows == 1 and mine["wh_group"].to_pylist() == ["repair"]
    assert mine["logins"].to_pylist() == [1]

    recorded = len(deployment.clickhouse("SELECT 1 FROM repairs"))
    again = run()
    assert again.returncode == 0, again.stderr[-3000:]
    assert " 0 repaired" in again.stdout and "no published period needed re-publishing" in again.stdout
    assert len(streamed.ledger(hour)) == entries + 1
    assert len(deployment.clickhouse("SELECT 1 FROM repairs")) == recorded  # nothing new recorded
    assert {k: normalize(streamed.view_rows(hour)[(REPAIR_UID, hour)][k]) for k in want} == want

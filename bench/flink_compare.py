"""Ours vs Flink SQL (BIGO's shape) on the same Pulsar topics and aggregates, on this box (issue 28).

Publishes ``--events`` demo-catalog events once, to fresh topics on the local broker: the topics
that feed ``user_hourly`` (the table both sides build), 1% bad and 0.5% late input as in every
drain. Then, on those same messages:

- **Flink**: a Flink SQL job generated from the catalog (``bench._flink_sql``: one Pulsar source
  table per topic, JSON format, a ``SELECT`` per topic projecting onto the wide columns, ``UNION
  ALL``, ``GROUP BY`` key and hour, mini-batch aggregation), run by PyFlink in its own virtualenv
  (``scripts/flink-setup``) as a subprocess (``bench/_flink_job.py``), local mini-cluster with
  ``--parallelism`` slots, streaming mode with sources that stop at the latest message (the
  connector's SQL source is unbounded, so batch mode refuses it). Sink: the print connector, one
  JSON text per changed row, into a file the bench reads back (no store);
- **ours**: the project's drain (``bench.stream_wide.drain_app``: ``--groups`` slot groups in one app,
  ``Trigger.AvailableNow``, both real sinks: ClickHouse and Delta, both wide tables) on a fresh app.

Figures: Flink's events/s = events / seconds from its first source task running to the job's end
(start-up apart: JVM, table declarations, planning, submission); ours = events / seconds from the
first batch's planning to the last commit (``widehouse.stream.measure``, issue 28's definition), and
the ratio ours / Flink. Exactness: Flink's final rows (the changelog folded) against ours in
ClickHouse (``user_hourly_merged``), every row and column, and both against the generator's
manifest (an independent computation).

    python -m bench flink_compare [--events 600000] [--groups 2] [--parallelism 2] [--flink-python PATH]
                                  [--subscription-type Exclusive|Shared] [--bad-classes a,b,...]

``--bad-classes`` narrows the generator's bad input (e.g. to the classes Flink SQL can filter
exactly: everything but ``wrong_type`` and ``malformed_json``, which Flink's JSON format partly
accepts; see ``bench._flink_sql``); ``--subscription-type`` picks the connector's
subscription type. The connector is not robust here: now and then a source fails as it starts
("Disconnected from server" while it positions its subscription, or "Exclusive consumer is already
connected": its set-up consumer is exclusive whatever the type); the job restarts (fixed delay, 5
attempts; counted in the table), and a run whose restarts run out fails with the job's error: run it
again.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from bench.common import machine, save, table
from bench.stream_wide import Bench, _suffix

TABLE = "user_hourly"
ROOT = Path(__file__).resolve().parent.parent
FLINK_PYTHON = Path(os.environ.get("WIDEHOUSE_FLINK_VENV", ROOT / ".venv-flink")) / "bin" / "python"
FLINK_JARS = Path(os.environ.get("WIDEHOUSE_FLINK_JARS", ROOT / ".vendor" / "flink"))
MINI_BATCH = {
    # what a Flink SQL user tunes first for a GROUP BY over a firehose: buffer, then aggregate
    "table.exec.mini-batch.enabled": "true",
    "table.exec.mini-batch.allow-latency": "2 s",
    "table.exec.mini-batch.size": "20000",
    "classloader.check-leaked-classloader": "false",
    # the connector sometimes fails as a source starts (a lost connection while it positions the
    # subscription, or its exclusive set-up consumer colliding with a reader); a restart re-reads
    # from the start, and folding the printed changelog keeps the last run's rows (restarts are
    # counted; a restart is not exact: no checkpoints)
    "restart-strategy.type": "fixed-delay",
    "restart-strategy.fixed-delay.attempts": "5",
    "restart-strategy.fixed-delay.delay": "1 s",
}
_CHANGE = re.compile(r"^(?:\d+> )?([+-][IUD])\[(.*)\]$")


def fold_changelog(lines: Iterable[str], key: str, hour: str) -> dict[tuple[Any, int], dict[str, Any]]:
    """The final rows of a printed changelog (``+I[{json}]``, ``-U[...]``, ``+U[...]``, ``-D[...]``),
    by (key, hour). Lines that are not changes (logs) are skipped."""
    rows: dict[tuple[Any, int], dict[str, Any]] = {}
    for line in lines:
        match = _CHANGE.match(line.rstrip("\n"))
        if match is None:
            continue
        kind, text = match.groups()
        row = json.loads(text)
        where = (row.pop(key), int(row.pop(hour)))
        if kind in ("+I", "+U"):
            rows[where] = row
        else:
            rows.pop(where, None)
    return rows


def run_flink(spec: dict[str, Any], work: Path, python: Path) -> tuple[dict[str, Any], Path]:
    """Run ``bench/_flink_job.py`` under ``python`` with ``spec``; its figures and its output file."""
    spec_path, out = work / "flink-spec.json", work / "flink-out.txt"
    spec["result"] = str(work / "flink-result.json")
    spec_path.write_text(json.dumps(spec))
    with out.open("w") as sink:
        code = subprocess.call(
            [str(python), str(ROOT / "bench" / "_flink_job.py"), str(spec_path)],
            stdout=sink,
            stderr=subprocess.STDOUT,
            cwd=work,
        )
    if code != 0:
        tail = out.read_text(errors="replace").splitlines()[-40:]
        raise RuntimeError(f"the Flink job exited with {code}; its output ends:\n" + "\n".join(tail))
    return json.loads(Path(spec["result"]).read_text()), out


def compare(
    expected: Mapping[tuple[Any, int], Mapping[str, Any]], actual: Mapping[tuple[Any, Any], Mapping[str, Any]]
) -> dict[str, Any]:
    """Values and rows that differ (``diff_rows``: doubles to a relative 1e-9, timestamps as epoch
    ms), and how many values differ per column."""
    from widehouse.generator.manifest import diff_rows

    problems = diff_rows(expected, actual, limit=10**9)
    rows = {p.split(": ", 1)[0] for p in problems}  # "<key> @ <hour>: <column> expected ..., got ..."
    columns = Counter(p.split(": ", 1)[1].split(" ", 1)[0] for p in problems if ": " in p)
    return {
        "rows": len(expected),
        "differences": len(problems),
        "rows_differing": len(rows),
        "columns": dict(columns.most_common()),
        "first": problems[:8],
    }


def measure(args: argparse.Namespace, bench: Bench) -> dict[str, Any]:
    from bench._flink_sql import PulsarEndpoint, job_statements
    from bench.stream_wide import drain_app
    from widehouse.catalog import load_catalog
    from widehouse.generator.badinput import BAD_CLASSES
    from widehouse.generator.options import GenerateOptions
    from widehouse.generator.run import generate

    suffix = _suffix()
    settings = bench.settings("flinkcmp", suffix=suffix)
    origin = load_catalog(settings.schemas_dir)
    feeding = [str(t.name) for t in origin.topics_for(TABLE)]
    only = "^(" + "|".join(re.escape(name) for name in feeding) + ")$"
    started = time.monotonic()
    manifest = generate(
        settings,
        GenerateOptions(
            count=args.events,
            rate=0,
            users=5000,
            tenant_suffix=suffix,
            create_topics=True,
            topics=only,
            bad_classes=tuple(args.bad_classes.split(",")) if args.bad_classes else BAD_CLASSES,
        ),
    )
    published_s = time.monotonic() - started
    catalog = origin.relocated(suffix)
    topics = sorted(manifest.published_name(t) for t in manifest.topics)
    expected = manifest.expected_rows(TABLE)

    work = bench.root / "flink"
    work.mkdir(parents=True)
    # the token (a secured broker) lands in the spec file under the run's temporary folder, deleted
    # with it by Bench.close
    pulsar = PulsarEndpoint(settings.pulsar.service_url, settings.pulsar.auth_token, args.subscription_type)
    statements = job_statements(catalog, TABLE, topics, pulsar, f"flink-{uuid.uuid4().hex[:8]}")
    jars = sorted(str(p) for p in FLINK_JARS.glob("*.jar"))
    if not jars:
        raise RuntimeError(f"no connector jars in {FLINK_JARS}: run scripts/flink-setup first")
    spec = {"statements": statements, "jars": jars, "parallelism": args.parallelism, "config": MINI_BATCH}
    flink, out = run_flink(spec, work, args.flink_python)
    with out.open(errors="replace") as lines:
        flink_rows = fold_changelog(lines, "wh_key", "wh_hour")
    with out.open(errors="replace") as lines:
        change_lines = sum(1 for line in lines if _CHANGE.match(line.rstrip("\n")))
    end = flink["ended_at"]
    begin = flink["sources_running_at"] or flink["running_at"] or flink["submitted_at"]
    flink_events = sum(manifest.counts(t).sent for t in manifest.topics)
    flink_fig = {
        "startup_s": (flink["running_at"] or flink["submitted_at"]) - flink["started_at"],
        "read_s": end - begin,
        "net_runtime_s": flink["net_runtime_s"],
        "rate": flink_events / max(end - begin, 1e-3),
        "rate_net_runtime": flink_events / max(flink["net_runtime_s"], 1e-3),
        "versions": {
            **flink["versions"],
            "connector": ", ".join(Path(j).stem for j in jars if "connector-pulsar" in j),
        },
        "restarts": flink["restarts"],
        "change_lines": change_lines,
    }

    ours = drain_app(bench, "fc", suffix, topics, args.groups, part="flinkcmp")
    app = ours.pop("app_obj")
    client = app.clickhouse()
    try:
        merged = client.query(f"SELECT * FROM {TABLE}_merged").named_results()
        ours_rows = {(r["uid"], r["hour"]): r for r in merged}
    finally:  # the service is shared: leave no benchmark database behind
        client.command(f"DROP DATABASE IF EXISTS `{client.database}`")
    for row in ours_rows.values():
        row.pop("uid")
        row.pop("hour")
    return {
        "events": flink_events,
        "topics": len(topics),
        "publish_s": published_s,
        "load_average": os.getloadavg(),
        "flink": flink_fig,
        "ours": {k: v for k, v in ours.items() if k not in {"timings", "series"}},
        "ratio": ours["wall_rate"] / max(flink_fig["rate"], 1e-3),
        "check_flink_vs_ours": compare(flink_rows, ours_rows),
        "check_flink_vs_manifest": compare(expected, flink_rows),
        "check_ours_vs_manifest": compare(expected, ours_rows),
    }


def render(result: dict[str, Any]) -> str:
    flink, ours = result["flink"], result["ours"]
    versions = flink["versions"]
    rows = [
        (
            f"Flink SQL {versions['pyflink']} (UNION ALL + GROUP BY, print sink)",
            result["events"],
            round(flink["read_s"], 2),
            round(flink["rate"]),
            f"start-up {flink['startup_s']:.1f} s; net run time {flink['net_runtime_s']:.1f} s; "
            f"{flink['restarts']} restarts",
        ),
        (
            "ours (drain, both sinks, both tables)",
            ours["events"],
            round(ours["events"] / max(ours["wall_rate"], 1e-3), 2),
            round(ours["wall_rate"]),
            f"{ours['batches']} batches; app {ours['app_s']:.1f} s",
        ),
    ]
    checks = [
        (
            name.replace("check_", "").replace("_", " "),
            c["rows"],
            c["rows_differing"],
            c["differences"],
            ", ".join(f"{column} {n}" for column, n in list(c["columns"].items())[:4]),
        )
        for name, c in result.items()
        if name.startswith("check_")
    ]
    load = ", ".join(f"{x:.1f}" for x in result["load_average"])
    return "\n".join(
        [
            table(
                f"\n{TABLE} from {result['events']:,} events on {result['topics']} topics, this box "
                f"(load {load})",
                ("side", "events", "wall s", "events/s", "notes"),
                rows,
            ),
            f"ratio ours / Flink: {result['ratio']:.2f}x  (Flink on Java {versions['java']}, "
            f"{versions['connector']}; Flink's rate over its net run time: "
            f"{flink['rate_net_runtime']:,.0f} ev/s)",
            table("\nexactness", ("check", "rows", "rows differing", "values differing", "most in"), checks),
        ]
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench flink_compare", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--events", type=int, default=600_000)
    parser.add_argument("--groups", type=int, default=2, help="our slot groups")
    parser.add_argument("--parallelism", type=int, default=os.cpu_count() or 2, help="Flink's slots")
    parser.add_argument(
        "--bad-classes", default="", help="the generator's bad-input classes, comma-separated (default: all)"
    )
    parser.add_argument(
        "--subscription-type",
        choices=("Exclusive", "Shared"),
        default="Exclusive",
        help="the Flink connector's subscription type",
    )
    parser.add_argument("--flink-python", type=Path, default=FLINK_PYTHON, help="python of the Flink venv")
    args = parser.parse_args(argv)
    if not args.flink_python.exists():
        print(f"no Flink virtualenv at {args.flink_python}: run scripts/flink-setup first", file=sys.stderr)
        return 2
    root = Path(tempfile.mkdtemp(prefix="widehouse-bench-flink-"))
    print(f"machine: {machine()}; load average {os.getloadavg()[0]:.1f}; state in {root}")
    bench = Bench(root, owns_spark=True)
    try:
        result = measure(args, bench)
    finally:
        bench.close()
    print(render(result))
    print(f"saved {save('flink_compare', result)}")
    return 0

"""StreamNative pulsar-spark connector on the same topics (the peer bench/pulsar_source.py compares to).

Maven Central has no build for Spark 4.x (``io.streamnative.connectors:pulsar-spark-connector_2.13``
does not exist there); the only one is ``pulsar-spark-connector_2.12:3.1.1.4`` for Spark 3.1 /
Scala 2.12. So it runs in its own environment, built by ``--setup`` under
``.vendor/bench-env/streamnative`` (git-ignored, nothing of it is committed):

- a Python 3.8 virtualenv (pyenv's or ``python3.8``/``python3.9`` on PATH) with pyspark 3.1.3 from PyPI;
- the connector's shaded jar from Maven Central;
- Spark 3.1 on JDK 17 (the only JDKs here are 17 and 25): the JVM gets the ``--add-opens`` flags
  Spark 3.3+ adds itself, and pyspark's Scala 2.12.10 library is swapped for 2.12.18 (same binary
  line; 2.12.10 cannot deserialize lambdas on JDK 17: "IllegalArgumentException: too many arguments").

    python -m bench pulsar_streamnative --setup
    python -m bench pulsar_streamnative --pattern 'persistent://t/ns/x.*'

This file also runs inside that environment (``python pulsar_streamnative.py run <json>``), so it
must stay valid Python 3.8 and import nothing from widehouse at module level.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ENV = ROOT / ".vendor" / "bench-env" / "streamnative"
MAVEN = "https://repo1.maven.org/maven2"
CONNECTOR = ("io/streamnative/connectors", "pulsar-spark-connector_2.12", "3.1.1.4")
SCALA = "2.12.18"
PYSPARK = "3.1.3"
JAVA_HOME = "/usr/lib/jvm/java-17-openjdk-amd64"
ADD_OPENS = " ".join(
    f"--add-opens=java.base/{p}=ALL-UNNAMED"
    for p in (
        "java.lang",
        "java.lang.invoke",
        "java.lang.reflect",
        "java.io",
        "java.net",
        "java.nio",
        "java.util",
        "java.util.concurrent",
        "java.util.concurrent.atomic",
        "sun.nio.ch",
        "sun.nio.cs",
        "sun.security.action",
        "sun.util.calendar",
    )
)


def _python38() -> str:
    for candidate in sorted(Path.home().glob(".pyenv/versions/3.[89].*/bin/python")):
        return str(candidate)
    for name in ("python3.8", "python3.9"):
        found = shutil.which(name)
        if found:
            return found
    raise RuntimeError("pyspark 3.1 needs Python 3.8 or 3.9; none found (pyenv or PATH)")


def _download(url: str, target: Path) -> None:
    if target.exists():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    with urllib.request.urlopen(url, timeout=300) as response, open(target.with_suffix(".part"), "wb") as out:
        shutil.copyfileobj(response, out)
    target.with_suffix(".part").rename(target)


def connector_jar() -> Path:
    _group, artifact, version = CONNECTOR
    return ENV / "jars" / f"{artifact}-{version}.jar"


def setup() -> Path:
    """Build the environment (idempotent); returns its Python."""
    python = ENV / "venv" / "bin" / "python"
    if not python.exists():
        subprocess.run([_python38(), "-m", "venv", str(ENV / "venv")], check=True)
    try:
        subprocess.run(
            [str(python), "-c", f"import pyspark; assert pyspark.__version__ == '{PYSPARK}'"], check=True
        )
    except subprocess.CalledProcessError:
        subprocess.run([str(python), "-m", "pip", "install", "-q", f"pyspark=={PYSPARK}"], check=True)
    group, artifact, version = CONNECTOR
    _download(f"{MAVEN}/{group}/{artifact}/{version}/{artifact}-{version}.jar", connector_jar())
    site = subprocess.run(
        [str(python), "-c", "import pyspark, os; print(os.path.dirname(pyspark.__file__))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    jars = Path(site) / "jars"
    for name in ("scala-library", "scala-reflect"):
        _download(
            f"{MAVEN}/org/scala-lang/{name}/{SCALA}/{name}-{SCALA}.jar", ENV / "jars" / f"{name}-{SCALA}.jar"
        )
        for old in jars.glob(f"{name}-2.12.*.jar"):
            if old.name != f"{name}-{SCALA}.jar":
                (ENV / "replaced").mkdir(exist_ok=True)
                old.rename(ENV / "replaced" / old.name)
        if not (jars / f"{name}-{SCALA}.jar").exists():
            shutil.copy(ENV / "jars" / f"{name}-{SCALA}.jar", jars / f"{name}-{SCALA}.jar")
    return python


def measure(pulsar: Any, pattern: str, expected: int, runs: int = 2) -> dict[str, Any]:
    """Best of ``runs`` Trigger.Once reads of ``pattern`` in one JVM (the first one warms it up).

    Called from the main environment; returns ``msgs_per_s`` (query wall time), ``batch_msgs_per_s``
    (rows / the batch's triggerExecution), or ``error``.
    """
    try:
        python = setup()
    except Exception as exc:  # report, do not fail the whole benchmark
        return {"error": f"setup failed: {exc}"}
    request = {
        "pattern": pattern,
        "service_url": pulsar.service_url,
        "admin_url": pulsar.admin_url,
        "runs": runs,
    }
    env = {**os.environ, "JAVA_HOME": JAVA_HOME, "PYSPARK_PYTHON": str(python)}
    env.pop("SPARK_HOME", None)
    proc = subprocess.run(
        [str(python), __file__, "run", json.dumps(request)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not results:
        return {"error": (proc.stderr or proc.stdout)[-400:]}
    for result in results:
        if expected >= 0 and result["rows"] != expected:
            return {"error": f"read {result['rows']} rows, expected {expected}"}
    best = min(results, key=lambda r: r["seconds"])
    return {
        "seconds": [r["seconds"] for r in results],
        "rows": best["rows"],
        "msgs_per_s": best["rows"] / best["seconds"],
        "batch_msgs_per_s": best["rows"] / max(best["trigger_ms"], 1) * 1000,
    }


def _run(request: dict[str, Any]) -> None:
    """Inside the Spark 3.1 environment: read everything once into the noop sink, ``runs`` times."""
    import tempfile

    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.jars", str(connector_jar()))
        .config("spark.driver.extraJavaOptions", "-XX:+IgnoreUnrecognizedVMOptions " + ADD_OPENS)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    for _ in range(int(request.get("runs", 1))):
        started = time.perf_counter()
        query = (
            spark.readStream.format("pulsar")
            .option("service.url", request["service_url"])
            .option("admin.url", request["admin_url"])
            .option("topicsPattern", request["pattern"])
            .option("startingOffsets", "earliest")
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", tempfile.mkdtemp(prefix="bench-streamnative-"))
            .trigger(once=True)
            .start()
        )
        query.awaitTermination()
        seconds = time.perf_counter() - started
        progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
        rows = sum(p["numInputRows"] for p in progress)
        trigger_ms = sum(p["durationMs"].get("triggerExecution", 0) for p in progress)
        print(json.dumps({"seconds": seconds, "rows": rows, "trigger_ms": trigger_ms}), flush=True)
    spark.stop()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench pulsar_streamnative", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--setup", action="store_true", help="build the Spark 3.1 environment")
    parser.add_argument("--pattern", help="topicsPattern (full names) to read once")
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args(argv)
    if args.setup:
        print(f"environment ready: {setup()}")
    if args.pattern:
        from widehouse.settings import load_settings

        result = measure(load_settings().pulsar, args.pattern, expected=-1, runs=args.runs)
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "run":
        _run(json.loads(sys.argv[2]))
    else:
        raise SystemExit(main(sys.argv[1:]))

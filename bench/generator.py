"""Traffic generator: messages/s generated, published (pre-serialized) and end to end into real Pulsar.

Three phases over the demo catalog (42 topics, ~70 producers, 1 % bad and 0.5 % late input, keys
routed to partitions), each the median of ``--runs``:

- generate: events + payloads + manifest accounting in one process, no Pulsar;
- publish: sending pre-serialized chunks (``widehouse generate --pregenerate``'s send phase);
- end to end: ``generate()`` as the CLI runs it (generation interleaved with sending, unpaced).

Topics live in a throw-away tenant suffix and are deleted after.

    python -m bench generator [--count 300000] [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from typing import Any

from bench.common import drop_tenants, machine, save, table
from widehouse.catalog import load_catalog
from widehouse.generator import GenerateOptions, TrafficGenerator, generate
from widehouse.generator.publisher import Publisher
from widehouse.pulsar import PulsarAdmin
from widehouse.settings import Settings, load_settings


def _options(count: int, suffix: str, **extra: Any) -> GenerateOptions:
    return GenerateOptions(
        count=count, rate=0, seed=7, users=10_000, tenant_suffix=suffix, create_topics=True, **extra
    )


def _generate_only(settings: Settings, count: int) -> float:
    catalog = load_catalog(settings.schemas_dir)
    start = time.perf_counter()
    generator = TrafficGenerator(catalog, _options(count, "x"))
    for _ in generator.chunks():
        pass
    generator.manifest()
    return count / (time.perf_counter() - start)


def _publish_only(settings: Settings, count: int, suffix: str) -> float:
    catalog = load_catalog(settings.schemas_dir).relocated(suffix)
    generator = TrafficGenerator(catalog, _options(count, suffix))
    chunks = list(generator.chunks())
    with PulsarAdmin(settings.pulsar) as admin:
        partitions = [admin.ensure_partitions(t.name, t.traffic.partitions) for t in generator.topics]
    publisher = Publisher(settings.pulsar, [t.name for t in generator.topics], partitions)
    start = time.perf_counter()
    for chunk in chunks:
        publisher.send(chunk, None)
    publisher.flush()
    elapsed = time.perf_counter() - start
    publisher.close()
    if publisher.stats.failed:
        raise RuntimeError(f"{publisher.stats.failed} sends failed: {publisher.stats.first_error}")
    return count / elapsed


def _end_to_end(settings: Settings, count: int, suffix: str) -> float:
    start = time.perf_counter()
    manifest = generate(settings, _options(count, suffix))
    elapsed = time.perf_counter() - start
    if not manifest.exact or manifest.counts().sent != count:
        raise RuntimeError(f"inexact run: {manifest.data.get('run')}")
    return count / elapsed


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench generator", description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=300_000, help="messages per run (default 300000)")
    parser.add_argument(
        "--runs", type=int, default=3, help="runs per phase; the median is reported (default 3)"
    )
    args = parser.parse_args(argv)
    settings = load_settings()
    suffix = f"bench{uuid.uuid4().hex[:6]}"
    phases: dict[str, list[float]] = {
        "generate (no Pulsar)": [],
        "publish pre-serialized": [],
        "end to end": [],
    }
    try:
        for run in range(args.runs):
            phases["generate (no Pulsar)"].append(_generate_only(settings, args.count))
            phases["publish pre-serialized"].append(_publish_only(settings, args.count, f"{suffix}p{run}"))
            phases["end to end"].append(_end_to_end(settings, args.count, f"{suffix}e{run}"))
            for kind in "pe":
                drop_tenants(settings.pulsar, [f"{suffix}{kind}{run}"])
    finally:
        for run in range(args.runs):
            for kind in "pe":
                drop_tenants(settings.pulsar, [f"{suffix}{kind}{run}"])
    rows = [
        (name, statistics.median(rates), min(rates), max(rates)) for name, rates in phases.items() if rates
    ]
    print(
        table(
            f"generator, {args.count:,} messages per run, median of {args.runs} ({machine()})",
            ("phase", "msg/s (median)", "min", "max"),
            rows,
        )
    )
    path = save("generator", {"count": args.count, "runs": args.runs, "phases": phases})
    print(f"\nraw figures: {path}")
    return 0

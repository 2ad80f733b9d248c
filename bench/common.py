"""Helpers shared by the benchmarks: timing, medians, a table printer, and a result file."""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

RESULTS_DIR = Path(__file__).parent / "results"


def timed(fn: Callable[[], T]) -> tuple[T, float]:
    """Run ``fn`` once; return its result and the elapsed wall time in seconds."""
    t0 = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - t0


def median_time(fn: Callable[[], object], runs: int = 5, warmup: int = 1) -> float:
    """Median wall time of ``runs`` calls after ``warmup`` untimed calls."""
    for _ in range(warmup):
        fn()
    return statistics.median(timed(fn)[1] for _ in range(runs))


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def table(title: str, header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A plain-text table with a title line, right-aligned numbers."""
    cells = [[_fmt(c) for c in header], *[[_fmt(c) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]

    def line(row: list[str]) -> str:
        return "  ".join(c.rjust(w) if _numeric(c) else c.ljust(w) for c, w in zip(row, widths, strict=True))

    out = [title, line(cells[0]), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in cells[1:]]
    return "\n".join(out)


def save(name: str, payload: dict[str, Any]) -> Path:
    """Write the figures as JSON under bench/results/ (git-ignored) for later comparison."""
    RESULTS_DIR.mkdir(exist_ok=True)
    path = RESULTS_DIR / f"{name}-{time.strftime('%Y%m%dT%H%M%S')}.json"
    path.write_text(json.dumps({"machine": machine(), **payload}, indent=2, default=str))
    return path


def drop_tenants(pulsar: Any, suffixes: Iterable[str]) -> int:
    """Delete the throw-away tenants ``<tenant>-<suffix>`` a benchmark published to, with everything
    in them; returns how many tenants went.

    A broker that keeps every run's topics (and the stream's subscriptions on them) grows slower
    with each run, so benchmarks clean up after themselves (``finally``). ``pulsar``: the
    ``PulsarSettings`` of the broker."""
    from widehouse.pulsar import PulsarAdmin

    ends = tuple(f"-{s}" for s in suffixes)
    if not ends:
        return 0
    with PulsarAdmin(pulsar) as admin:
        tenants = [t for t in admin.tenants() if t.endswith(ends)]
        for tenant in tenants:
            for namespace in admin.namespaces(tenant):
                # readers still open (kept by a process for its next batch) would re-create a
                # deleted topic when they reconnect
                admin.set_auto_topic_creation(namespace, False)
                for topic in admin.list_partitioned_topics(namespace):
                    admin.delete_topic(topic)
                for topic in admin.list_topics(namespace):  # what is left is not partitioned
                    admin.delete_topic(topic)
                admin.delete_namespace(namespace)
            admin.delete_tenant(tenant)
    return len(tenants)


def _fmt(value: object) -> str:
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) >= 100:
            return f"{value:,.0f}"
        if abs(value) >= 1:
            return f"{value:.2f}"
        return f"{value:.4f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _numeric(text: str) -> bool:
    return text.replace(",", "").replace(".", "", 1).replace("-", "", 1).replace("x", "").isdigit()


def drop_databases(clickhouse: Any, names: Iterable[str]) -> int:
    """Drop the throw-away ClickHouse databases a benchmark wrote; returns how many there were.
    ``clickhouse``: the ``ClickHouseSettings`` of the service (the process's own, not a part's)."""
    from widehouse.clickhouse import connect

    names = sorted(names)
    if not names:
        return 0
    client = connect(clickhouse)
    try:
        present = {str(r[0]) for r in client.rows("SELECT name FROM system.databases")}
        for name in names:
            if name in present:
                client.command(f"DROP DATABASE IF EXISTS `{name}` SYNC")
    finally:
        client.close()
    return len(present.intersection(names))


def stream_plan() -> Any:
    """The stream transform's ``TransformPlan`` and ``output_schema`` (as attributes), wherever the
    library under test keeps them: ``widehouse.stream.plan`` and ``widehouse.stream.output`` now, the
    plan module alone or ``widehouse.stream.transform`` in libraries from before (``bench ab``
    against an older revision imports this checkout's benchmarks over that library)."""
    import importlib
    from types import SimpleNamespace

    found: dict[str, Any] = {}
    for name in ("widehouse.stream.output", "widehouse.stream.plan", "widehouse.stream.transform"):
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError:
            continue
        for attribute in ("TransformPlan", "output_schema"):
            if attribute not in found and hasattr(module, attribute):
                found[attribute] = getattr(module, attribute)
    return SimpleNamespace(**found)

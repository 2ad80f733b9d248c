"""Traffic from a CSV file: header ``topic,msg_rate,byte_rate``, one row per topic.

Topic names follow Pulsar's own shorthand: ``persistent://tenant/namespace/topic`` as is,
``tenant/namespace/topic`` and a bare ``topic`` (in ``public/default``) are expanded. Rates are
messages/s and bytes/s, finite and >= 0. A topic listed twice, a partition name
(``...-partition-N``), a missing or unknown column, or a bad number is an error naming the file,
line and column.
"""

from __future__ import annotations

import csv
import io
import math
import os
from pathlib import Path
from typing import Any

from widehouse.errors import PlanError
from widehouse.planner.model import TopicTraffic, check_topic

COLUMNS = ("topic", "msg_rate", "byte_rate")


def normalize_topic(name: str) -> str:
    """Expand Pulsar's short topic names to ``persistent://tenant/namespace/topic``."""
    name = name.strip()
    if "://" in name:
        return name
    parts = name.split("/")
    if len(parts) == 1:
        return f"persistent://public/default/{name}"
    if len(parts) == 3:
        return f"persistent://{name}"
    return name  # invalid; check_topic names it


def load_traffic_csv(path: str | os.PathLike[str]) -> list[TopicTraffic]:
    """Read a traffic CSV (see the module docstring); rows come back sorted by topic."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8-sig")  # tolerate a BOM
    except (OSError, UnicodeDecodeError) as exc:
        raise PlanError(f"cannot read traffic file {source}: {exc}") from exc
    try:
        return _parse(csv.reader(io.StringIO(text, newline="")), source)
    except csv.Error as exc:
        raise PlanError(f"traffic file {source} is not valid CSV: {exc}") from exc


def _parse(reader: Any, source: str) -> list[TopicTraffic]:
    header = next(reader, None)
    if header is None:
        raise PlanError(f"traffic file {source} is empty; expected the header {','.join(COLUMNS)}")
    columns = [c.strip().lower() for c in header]
    missing = [c for c in COLUMNS if c not in columns]
    unknown = [c for c in columns if c not in COLUMNS]
    if missing or unknown or len(set(columns)) != len(columns):
        raise PlanError(
            f"{source}:1: header must be {','.join(COLUMNS)}; got {','.join(columns) or '(empty)'}"
        )
    index = {c: columns.index(c) for c in COLUMNS}
    records: dict[str, TopicTraffic] = {}
    lines: dict[str, int] = {}
    for row in reader:
        line = reader.line_num
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(columns):
            raise PlanError(f"{source}:{line}: expected {len(columns)} columns, got {len(row)}")
        topic = check_topic(normalize_topic(row[index["topic"]]), f"{source}:{line}")
        rates = [_rate(row[index[c]], c, source, line) for c in ("msg_rate", "byte_rate")]
        if topic in records:
            raise PlanError(f"{source}:{line}: topic {topic} is already on line {lines[topic]}")
        records[topic] = TopicTraffic(topic, rates[0], rates[1])
        lines[topic] = line
    return [records[t] for t in sorted(records)]


def write_traffic_csv(records: list[TopicTraffic], path: str | os.PathLike[str]) -> Path:
    """Write traffic in the same format (for tests, benchmarks and snapshots of live traffic)."""
    target = Path(path)
    with target.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(COLUMNS)
        for record in sorted(records, key=lambda r: r.topic):
            writer.writerow((record.topic, repr(float(record.msg_rate)), repr(float(record.byte_rate))))
    return target


def _rate(cell: str, column: str, source: str, line: int) -> float:
    try:
        value = float(cell)
    except ValueError:
        raise PlanError(f"{source}:{line}: {column}: {cell.strip()!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise PlanError(f"{source}:{line}: {column}: must be a finite number >= 0, got {cell.strip()!r}")
    return value

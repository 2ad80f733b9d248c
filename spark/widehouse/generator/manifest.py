"""The generator's manifest: what was sent, and exactly what the pipeline must produce from it.

A JSON file (see :meth:`Manifest.to_json`) with

- ``options``/``catalog``/``rules``: what shaped the traffic (seed, rates, base time, catalog
  fingerprint, event-time rules, payload limit);
- ``policy`` and ``reasons``: per label, accept / late / quarantine and the expected rejection reason;
- ``totals`` and ``topics``: per topic (catalog name) counts: sent, wide (accepted on time), late,
  quarantined, and per label and per rejection reason;
- ``expected``: per wide table at its grain, the final values per (key, period), computed by the
  catalog's reference aggregation (:mod:`widehouse.catalog.semantics.fold`) over the accepted, on-time
  events. Rows are sparse on disk (counts of 0 and nulls left out); :meth:`Manifest.expected_rows`
  gives full rows;
- ``run``: what differs between runs (publish timestamps, achieved rate, lag, published topic names)
  and ``exact``: whether publishing stayed within the timing margins the expectations assume.

Everything but ``run`` is identical for the same catalog, options and seed.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from widehouse.catalog.eventtime import iso_utc
from widehouse.errors import ConfigError

FORMAT = 1


@dataclass(frozen=True)
class TopicCounts:
    sent: int
    wide: int
    late: int
    quarantined: int
    by_label: dict[str, int]
    by_reason: dict[str, int]


@dataclass
class Manifest:
    """A loaded (or freshly built) manifest; ``data`` is the JSON document."""

    data: dict[str, Any]
    _rows_cache: dict[str, dict[tuple[Any, int], dict[str, Any]]] = field(default_factory=dict, repr=False)

    # -- I/O ---------------------------------------------------------------------------------
    @classmethod
    def load(cls, path: Path) -> Manifest:
        try:
            data = orjson.loads(Path(path).read_bytes())
        except (OSError, orjson.JSONDecodeError) as exc:
            raise ConfigError(f"cannot read the manifest {path}: {exc}") from exc
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ConfigError(f"{path} is not a Widehouse generator manifest (format {FORMAT})")
        return cls(data)

    def to_json(self) -> bytes:
        return orjson.dumps(self.data, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)

    def save(self, path: Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_bytes(self.to_json())
        tmp.replace(path)
        return path

    @property
    def deterministic(self) -> dict[str, Any]:
        """The document without ``run``: equal for equal catalog, options and seed."""
        return {k: v for k, v in self.data.items() if k != "run"}

    # -- counts ------------------------------------------------------------------------------
    @property
    def topics(self) -> list[str]:
        """Catalog names of the topics that got traffic."""
        return sorted(self.data["topics"])

    def published_name(self, topic: str) -> str:
        """The name a catalog topic was published under (differs with a tenant suffix)."""
        return str(self.data.get("run", {}).get("topic_names", {}).get(topic, topic))

    def counts(self, topic: str | None = None) -> TopicCounts:
        """Counts for one topic (catalog name) or, with no topic, the totals."""
        node = self.data["totals"] if topic is None else self.data["topics"][topic]
        return TopicCounts(
            sent=node["sent"],
            wide=node["wide"],
            late=node["late"],
            quarantined=node["quarantined"],
            by_label=dict(node["by_label"]),
            by_reason=dict(node["by_reason"]),
        )

    @property
    def exact(self) -> bool:
        """Publishing kept within the timing margins (or nothing was published)."""
        return bool(self.data.get("run", {}).get("exact", True))

    # -- expectations ------------------------------------------------------------------------
    def tables(self) -> list[str]:
        return sorted(self.data["expected"])

    def columns(self, table: str) -> list[str]:
        return list(self.data["expected"][table]["columns"])

    def expected_rows(self, table: str) -> dict[tuple[Any, int], dict[str, Any]]:
        """Full expected rows of ``table``: ``{(key, period_start_ms): {column: value}}``.

        Counts absent on disk are 0, other absent values None; timestamps are epoch ms.
        """
        cached = self._rows_cache.get(table)
        if cached is not None:
            return cached
        node = self.data["expected"][table]
        columns = node["columns"]
        counts = set(node["count_columns"])
        empty = {c: (0 if c in counts else None) for c in columns}
        rows = {(row["key"], row["period_ms"]): {**empty, **row["values"]} for row in node["rows"]}
        self._rows_cache[table] = rows
        return rows


def period_rows(final: Mapping[tuple[Any, int], Mapping[str, Any]], counts: set[str]) -> list[dict[str, Any]]:
    """Rows for the manifest, sorted by key and period; counts of 0 and nulls left out."""
    rows = []
    for (key, period), values in sorted(final.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        kept = {c: v for c, v in values.items() if v is not None and not (c in counts and v == 0)}
        rows.append({"key": key, "period": iso_utc(period), "period_ms": period, "values": kept})
    return rows


# -------------------------------------------------------------------------------- comparisons
def normalize(value: Any) -> Any:
    """Make a value read back from a sink comparable with the manifest's (timestamps to epoch ms)."""
    if isinstance(value, dt.datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        return round(moment.timestamp() * 1000)
    if isinstance(value, dt.date):
        return round(dt.datetime(value.year, value.month, value.day, tzinfo=dt.UTC).timestamp() * 1000)
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return value.item()
    return value


def diff_rows(
    expected: Mapping[tuple[Any, int], Mapping[str, Any]],
    actual: Mapping[tuple[Any, Any], Mapping[str, Any]],
    rel_tol: float = 1e-9,
    limit: int = 20,
) -> list[str]:
    """Differences between expected and actual rows (keys (key, period)), at most ``limit`` lines.

    Actual periods and values may be datetimes (normalized to epoch ms); doubles compare with
    ``rel_tol`` because sums of doubles depend on the order of addition.
    """
    actual_norm = {(normalize(k), normalize(p)): v for (k, p), v in actual.items()}
    problems: list[str] = []
    for row_key in sorted(set(expected) | set(actual_norm), key=lambda k: (str(k[0]), k[1])):
        if len(problems) >= limit:
            problems.append("...")
            break
        where = f"{row_key[0]} @ {iso_utc(int(row_key[1]))}"
        if row_key not in actual_norm:
            problems.append(f"missing row {where}")
            continue
        if row_key not in expected:
            problems.append(f"unexpected row {where}")
            continue
        want, got = expected[row_key], actual_norm[row_key]
        for column, value in want.items():
            other = normalize(got.get(column))
            if not _same(value, other, rel_tol):
                problems.append(f"{where}: {column} expected {value!r}, got {other!r}")
    return problems


def _same(a: Any, b: Any, rel_tol: float) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        return math.isclose(float(a), float(b), rel_tol=rel_tol, abs_tol=1e-9)
    return bool(a == b)

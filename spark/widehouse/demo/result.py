"""What a demo run found: its checks against the manifest, the tables it shows, its figures.

The demo returns a :class:`DemoResult`; ``widehouse demo`` renders it (and can write it as JSON with
``--result FILE``), and the end-to-end test asserts on it rather than on printed text.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Check:
    """One comparison: a sink's table against the generator's manifest (or another expectation)."""

    name: str
    expected: int | str
    ok: bool
    detail: str = ""
    """``exact match``, or what differs."""


@dataclass(frozen=True)
class Section:
    """A titled table the demo shows (analyst queries, totals, figures)."""

    title: str
    header: tuple[str, ...]
    rows: list[tuple[Any, ...]]


@dataclass
class DemoResult:
    checks: list[Check] = field(default_factory=list)
    sections: list[Section] = field(default_factory=list)
    figures: dict[str, float | int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)

    def check(self, name: str, expected: int | str, ok: bool, detail: str = "") -> None:
        self.checks.append(Check(name, expected, ok, detail or ("exact match" if ok else "different")))

    def write_json(self, path: Path) -> None:
        body = {
            "ok": self.ok,
            "checks": [asdict(c) for c in self.checks],
            "sections": [{"title": s.title, "header": s.header, "rows": s.rows} for s in self.sections],
            "figures": self.figures,
            "notes": self.notes,
        }
        path.write_text(json.dumps(body, indent=2, default=str), encoding="utf-8")

"""Collecting catalog problems: each names the file, line, field and what is wrong.

The loader reports every problem it finds at once (:class:`CatalogValidationError`), so one run of
``widehouse catalog check`` lists everything to fix.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from widehouse.catalog.types import check_identifier
from widehouse.catalog.yamlio import YList, YMap
from widehouse.errors import CatalogError


@dataclass(frozen=True)
class Problem:
    file: str
    line: int
    where: str
    message: str

    def __str__(self) -> str:
        location = f"{self.file}:{self.line}" if self.line else self.file
        return f"{location}: {self.where}: {self.message}" if self.where else f"{location}: {self.message}"


class CatalogValidationError(CatalogError):
    """Every problem found in a catalog; ``problems`` lists them (file, line, where, message)."""

    def __init__(self, root: Path, problems: list[Problem]) -> None:
        self.root = root
        self.problems = problems
        if len(problems) == 1:
            message = str(problems[0])
        else:
            lines = "\n".join(f"  {p}" for p in problems)
            message = f"{len(problems)} problems in the catalog at {root}:\n{lines}"
        super().__init__(message)


class Problems:
    """Every problem found so far, in order."""

    def __init__(self) -> None:
        self.items: list[Problem] = []

    def add(self, file: str, line: int, where: str, message: str) -> None:
        self.items.append(Problem(file, line, where, message))


class FileProblems:
    """Problems of one file; ``where`` strings are dotted paths inside it."""

    def __init__(self, problems: Problems, path: Path, display: str) -> None:
        self.problems = problems
        self.path = path
        self.display = display

    def add(self, line: int, where: str, message: str) -> None:
        self.problems.add(self.display, line, where, message)

    def keys(self, node: YMap, where: str, required: Iterable[str], optional: Iterable[str] = ()) -> bool:
        """Report missing required keys and unknown keys; True when all required keys are present."""
        required, optional = tuple(required), tuple(optional)
        allowed = set(required) | set(optional)
        ok = True
        for key in node:
            if key not in allowed:
                self.add(
                    node.line_of(key),
                    join(where, key),
                    f"unknown key {key!r}; expected one of: {', '.join(sorted(allowed))}",
                )
        for key in required:
            if key not in node:
                self.add(node.line, where or "(top level)", f"missing required key {key!r}")
                ok = False
        return ok

    def ident(self, value: object, line: int, where: str, what: str) -> bool:
        problem = check_identifier(value)
        if problem:
            self.add(line, where, f"{what} {problem}")
            return False
        return True


def join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def line_of(node: object, key: str | None = None, default: int = 0) -> int:
    if isinstance(node, YMap):
        return node.line_of(key) if key is not None else node.line
    if isinstance(node, YList):
        return node.line
    return default


def text_value(f: FileProblems, node: YMap, key: str, default: str) -> str:
    value = node.get(key, default)
    if not isinstance(value, str):
        f.add(node.line_of(key), key, "expected a string")
        return default
    return value.strip()


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> bool:
    return (is_int(value) or isinstance(value, float)) and math.isfinite(float(value))  # type: ignore[arg-type]

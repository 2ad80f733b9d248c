"""Old code against new: a benchmark run in alternating pairs, another revision's library vs this one.

On a shared box the speed moves by tens of per cent within the hour (NOTES, issue 28), so two
figures taken minutes apart say little about a change. This runs the same benchmark in pairs, the
library (``spark/``) of ``--against`` and the checkout's, alternating which goes first, and prints
each figure's runs side by side with the ratio of the medians::

    python -m bench ab --against HEAD~1 --pairs 3 -- transform --events 200000 --runs 3

Only the library is swapped (``git archive <rev> spark``, first on ``PYTHONPATH``, byte-compiled
like the checkout's); the benchmark's own code is this checkout's. On ``local[*]`` Spark's Python
workers inherit ``PYTHONPATH`` (checked with plain pyspark), so benchmarks that run Spark
applications compare too; on a cluster the executors import the shipped wheel instead. Services are
the running ones. Figures are the top-level numbers of the JSON the benchmark saves (``--figure``
picks some, dotted paths reach inside).
"""

from __future__ import annotations

import argparse
import compileall
import io
import json
import os
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from bench.common import save, table

ROOT = Path(__file__).resolve().parents[1]
_SAVED = re.compile(r"saved (?:to )?(\S+\.json)\s*$", re.MULTILINE)

Runner = Callable[[list[str], Mapping[str, str]], dict[str, Any]]
"""Runs ``python -m bench <argv>`` with an environment; returns the JSON the benchmark saved."""


class AbError(Exception):
    """A revision, benchmark run or figure that cannot be compared."""


def export_library(rev: str, into: Path, repo: Path = ROOT) -> Path:
    """``spark/`` of ``rev`` extracted under ``into``; returns the directory to put on the path."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
            cwd=repo, capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        archive = subprocess.run(
            ["git", "archive", "--format=tar", commit, "spark"], cwd=repo, capture_output=True, check=True
        ).stdout
    except subprocess.CalledProcessError as exc:
        raise AbError(f"--against {rev!r} is not a commit of {repo} with a spark/ directory") from exc
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return compiled(into / "spark")


def compiled(library: Path) -> Path:
    """``library`` with the bytecode of its modules written beside them; returns it.

    Both sides get it, as ``make setup`` gives the checkout's library. Where
    ``PYTHONDONTWRITEBYTECODE`` is set (this sandbox), a library never compiled is compiled from
    source again by every process that imports it: each of Spark's Python processes (~0.1-0.3
    core-s each), so a side without bytecode lost every start-up comparison for that alone."""
    if not compileall.compile_dir(str(library), quiet=1):
        raise AbError(f"the library at {library} does not compile")
    return library


def run_bench(argv: list[str], env: Mapping[str, str]) -> dict[str, Any]:
    """One ``python -m bench`` run in a process of its own; its saved JSON."""
    done = subprocess.run(
        [sys.executable, "-m", "bench", *argv],
        check=False,
        cwd=ROOT,
        env=dict(env),
        capture_output=True,
        text=True,
    )
    found = _SAVED.findall(done.stdout)
    if done.returncode != 0 or not found:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise AbError(f"bench {' '.join(argv)} ended with {done.returncode}: " + " | ".join(tail))
    return dict(json.loads(Path(found[-1]).read_text()))


def figure(result: Mapping[str, Any], key: str) -> float | None:
    """The number at ``key`` (dotted: ``parts.drain.ev_s``; list items by index), or None."""
    value: Any = result
    for part in key.split("."):
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if is_number else None


def default_figures(results: list[dict[str, Any]]) -> list[str]:
    """The top-level numbers every result has, in the first result's order."""
    first = results[0]
    return [k for k in first if all(figure(r, k) is not None for r in results)]


def checkout_dirs(environ: Mapping[str, str]) -> dict[str, str]:
    """The directories the library derives from this checkout, named for both sides (unless set).

    The old side's library is extracted outside any checkout, so left alone it would look for its
    state (service passwords, checkpoints), JVM parts and catalog under ``~/.local``."""
    from widehouse import paths

    dirs = {
        "WIDEHOUSE_STATE_DIR": paths.default_state_dir(),
        "WIDEHOUSE_VENDOR_DIR": paths.default_vendor_dir(),
        "WIDEHOUSE_SCHEMAS_DIR": paths.default_schemas_dir(),
    }
    return {name: str(path) for name, path in dirs.items() if name not in environ}


def compare(
    bench: list[str], old_path: Path, pairs: int, runner: Runner = run_bench
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``pairs`` runs of each side, alternating which goes first (old first in odd pairs)."""
    base = {**checkout_dirs(os.environ), **{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}}
    inherited = os.environ.get("PYTHONPATH")
    old_env = {**base, "PYTHONPATH": os.pathsep.join(p for p in (str(old_path), inherited) if p)}
    new_env = {**base, **({"PYTHONPATH": inherited} if inherited else {})}
    old: list[dict[str, Any]] = []
    new: list[dict[str, Any]] = []
    for n in range(pairs):
        order = [(old, old_env), (new, new_env)] if n % 2 == 0 else [(new, new_env), (old, old_env)]
        for results, env in order:
            results.append(runner(bench, env))
    return old, new


def summary(old: list[dict[str, Any]], new: list[dict[str, Any]], keys: list[str]) -> list[list[object]]:
    """Rows of (figure, old runs, new runs, new median / old median)."""
    rows: list[list[object]] = []
    for key in keys:
        a = [figure(r, key) for r in old]
        b = [figure(r, key) for r in new]
        if any(v is None for v in (*a, *b)):
            have = ", ".join(default_figures(old + new))
            raise AbError(f"figure {key!r} is missing from a run; the runs have: {have}")
        olds, news = [float(v) for v in a if v is not None], [float(v) for v in b if v is not None]
        middle = statistics.median(olds)
        ratio = statistics.median(news) / middle if middle else float("nan")
        rows.append(
            [key, " / ".join(f"{v:.4g}" for v in olds), " / ".join(f"{v:.4g}" for v in news), f"{ratio:.3f}"]
        )
    return rows


def main(argv: list[str]) -> int:
    if "--" not in argv:
        print(
            "usage: python -m bench ab --against REV [--pairs N] [--figure KEY ...] -- NAME [options]",
            file=sys.stderr,
        )
        return 2
    cut = argv.index("--")
    parser = argparse.ArgumentParser(prog="python -m bench ab", description=__doc__.splitlines()[0])
    parser.add_argument("--against", required=True, help="the revision whose spark/ is the old side")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--figure", action="append", default=[], help="a figure to compare (dotted path)")
    args = parser.parse_args(argv[:cut])
    bench = argv[cut + 1 :]
    if not bench or bench[0] == "ab":
        print("name the benchmark to run after --", file=sys.stderr)
        return 2
    if args.pairs < 1:
        print(f"--pairs must be at least 1, not {args.pairs}", file=sys.stderr)
        return 2
    try:
        with tempfile.TemporaryDirectory(prefix="bench-ab-") as tmp:
            compiled(ROOT / "spark")  # this checkout's edited modules, as the old side's
            old, new = compare(bench, export_library(args.against, Path(tmp)), args.pairs)
        keys = args.figure or default_figures(old + new)
        rows = summary(old, new, keys)
    except AbError as exc:
        print(f"bench ab: {exc}", file=sys.stderr)
        return 1
    title = f"{' '.join(bench)}: {args.against} (old) against this checkout (new), {args.pairs} pairs"
    print(table(title, ["figure", "old runs", "new runs", "new / old (medians)"], rows))
    path = save("ab", {"against": args.against, "bench": bench, "old": old, "new": new, "rows": rows})
    print(f"saved {path}")
    return 0

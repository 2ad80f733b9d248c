"""Run a benchmark: ``python -m bench <name> [options]``; ``python -m bench`` lists them.

Each benchmark is a module ``bench/<name>.py`` with a docstring (its first line is the summary) and
``main(argv: list[str]) -> int``. Benchmarks print tables of measured figures (see bench.common);
they are not tests and assert nothing about speed.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys
from pathlib import Path


def available() -> dict[str, str]:
    found = {}
    for info in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if info.name.startswith("_") or info.name == "common":
            continue
        module = importlib.import_module(f"bench.{info.name}")
        found[info.name] = (module.__doc__ or "").strip().splitlines()[0] if module.__doc__ else ""
    return found


def share_local_password() -> None:
    """Benchmarks keep their state in temporary dirs but use the checkout's running local services:
    export the checkout's ClickHouse password (the one `widehouse services up` generated) so the
    settings they load with another state dir still reach the ClickHouse service."""
    if os.environ.get("WIDEHOUSE_CLICKHOUSE_PASSWORD"):
        return
    from widehouse.settings import load_settings

    password = load_settings().local.clickhouse_password
    if password is not None:
        os.environ["WIDEHOUSE_CLICKHOUSE_PASSWORD"] = password


def main(argv: list[str]) -> int:
    if not argv or argv[0] in {"-h", "--help"}:
        print("usage: python -m bench <name> [options]\n\nbenchmarks:")
        for name, summary in sorted(available().items()):
            print(f"  {name:<20} {summary}")
        return 0
    name, rest = argv[0], argv[1:]
    if name not in available():
        print(f"unknown benchmark {name!r}; run `python -m bench` for the list", file=sys.stderr)
        return 2
    share_local_password()
    module = importlib.import_module(f"bench.{name}")
    return int(module.main(rest))


sys.exit(main(sys.argv[1:]))

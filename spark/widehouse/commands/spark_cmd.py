"""``widehouse spark package``: build what jobs ship to a cluster's executors.

See :mod:`widehouse.spark.shipping` for the two artefacts and when to use which.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from widehouse import paths
from widehouse.errors import ConfigError
from widehouse.settings import Settings
from widehouse.spark import shipping


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "spark",
        help="Spark cluster helpers (package: build the wheel and executor environment jobs ship)",
        description="`package` builds the widehouse wheel (for WIDEHOUSE_SPARK_PY_FILES) and a packed "
        "executor environment (for WIDEHOUSE_SPARK_ARCHIVE) and prints the settings that use them.",
    )
    actions = parser.add_subparsers(dest="spark_action", required=True)
    pack = actions.add_parser("package", help="build the wheel and the packed executor environment")
    pack.add_argument("--out", type=Path, help="output dir (default: <state dir>/spark/ship)")
    pack.add_argument("--source", type=Path, help="project checkout to build (default: this one)")
    pack.add_argument("--constraints", type=Path, help="pins (default: <source>/constraints.txt)")
    pack.add_argument("--wheel-only", action="store_true", help="skip the packed environment")
    pack.set_defaults(func=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    source = args.source or paths.source_root()
    if source is None:
        raise ConfigError("not running from a checkout: pass --source <checkout of widehouse>")
    out = args.out or settings.state_dir / "spark" / "ship"
    constraints = args.constraints or source / "constraints.txt"
    t0 = time.monotonic()
    built = shipping.package(source.resolve(), out.resolve(), constraints, with_env=not args.wheel_only)
    print(f"built in {time.monotonic() - t0:.1f}s")
    print(f"WIDEHOUSE_SPARK_PY_FILES={built.wheel}")
    if built.archive is not None:
        print(f"WIDEHOUSE_SPARK_ARCHIVE={built.archive}  # {built.archive_bytes / 1e6:.0f} MB")
    return 0

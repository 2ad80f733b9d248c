"""``widehouse spark package``: build what jobs ship to a cluster's executors (see
:mod:`widehouse.spark.shipping` for the two artefacts and when to use which); ``widehouse spark
archive``: Spark's start-up caches: the bytecode of Spark's Python zips
(:mod:`widehouse.spark.python_zips`), then the driver JVM's class-data-sharing archive
(:mod:`widehouse.spark.class_archive`).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from widehouse import paths
from widehouse.errors import ConfigError, SetupError
from widehouse.settings import Settings
from widehouse.spark import class_archive, python_zips, shipping


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "spark",
        help="Spark helpers (package: what jobs ship to a cluster; archive: Spark's start-up caches)",
        description="`package` builds the widehouse wheel (for WIDEHOUSE_SPARK_PY_FILES) and a packed "
        "executor environment (for WIDEHOUSE_SPARK_ARCHIVE) and prints the settings that use them. "
        "`archive` adds bytecode to Spark's Python zips (so Spark's Python processes import pyspark "
        "without compiling it) and trains the driver JVM's class-data-sharing archive for this JDK and "
        "Spark (in WIDEHOUSE_SPARK_CLASS_ARCHIVE_DIR); `make setup` runs it.",
    )
    actions = parser.add_subparsers(dest="spark_action", required=True)
    pack = actions.add_parser("package", help="build the wheel and the packed executor environment")
    pack.add_argument("--out", type=Path, help="output dir (default: <state dir>/spark/ship)")
    pack.add_argument("--source", type=Path, help="project checkout to build (default: this one)")
    pack.add_argument("--constraints", type=Path, help="pins (default: <source>/constraints.txt)")
    pack.add_argument("--wheel-only", action="store_true", help="skip the packed environment")
    pack.set_defaults(func=run)
    archive = actions.add_parser(
        "archive",
        help="compile Spark's Python zips and train the driver JVM's class archive (no-op when done)",
    )
    archive.add_argument("--force", action="store_true", help="train the class archive again")
    archive.set_defaults(func=run_archive)


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


def run_archive(args: argparse.Namespace, settings: Settings) -> int:
    """The bytecode of Spark's Python zips, then the class archive; a failure of the first is
    reported (exit code 1) without keeping the second from being built."""
    status = 0
    t0 = time.monotonic()
    try:
        zips = python_zips.compile_zips()
    except SetupError as exc:
        print(f"bytecode of Spark's Python zips not added: {exc}", file=sys.stderr)
        status = 1
    else:
        for path, compiled in zips:
            state = f"{compiled:,} modules compiled" if compiled else "up to date"
            print(f"bytecode of {path.name}: {state} ({path})")
        if any(compiled for _, compiled in zips):
            print(f"Spark's Python zips compiled in {time.monotonic() - t0:.1f}s")
    if settings.spark.class_archive_dir is None:
        print("class archives are off (WIDEHOUSE_SPARK_CLASS_ARCHIVE_DIR=off): nothing to build")
        return status
    t0 = time.monotonic()
    path, built = class_archive.build(settings, force=args.force)
    if built:
        print(f"class archive built in {time.monotonic() - t0:.1f}s: {path}")
    else:
        print(f"class archive up to date: {path}")
    return status

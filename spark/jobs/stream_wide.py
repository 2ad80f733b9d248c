"""Streaming wide-table job for slot groups (spark-submit entrypoint).

    spark-submit spark/jobs/stream_wide.py --group g001 [--plan PLAN.json]
    python spark/jobs/stream_wide.py --all-groups --available-now

argparse -> settings -> widehouse.stream.spark.job.run_stream -> exit code; the same as
``widehouse stream`` (it shares the command's argument definitions, nothing else of the CLI).
"""

from __future__ import annotations

import argparse
import logging
import sys

from widehouse.commands.stream_cmd import add_arguments
from widehouse.errors import ConfigError, WidehouseError
from widehouse.settings import load_settings
from widehouse.stream.options import Fault, RunOptions, resolve_groups
from widehouse.stream.spark.job import run_stream


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="stream_wide.py", description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        settings = load_settings()
        groups = resolve_groups(
            settings.state_dir,
            names=args.groups,
            all_groups=args.all_groups,
            plan=args.plan,
            topics=args.topics,
        )
        options = RunOptions(
            available_now=args.available_now,
            duration_seconds=args.duration,
            faults=tuple(Fault.parse(f) for f in args.fault),
            starting_offsets=args.starting_offsets,
        )
        return run_stream(settings, groups, options)
    except ConfigError as exc:
        print(f"stream_wide: configuration error: {exc}", file=sys.stderr)
        return 2
    except WidehouseError as exc:
        print(f"stream_wide: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

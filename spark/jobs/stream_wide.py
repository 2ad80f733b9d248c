"""Streaming wide-table job for slot groups (spark-submit entrypoint).

    spark-submit spark/jobs/stream_wide.py --group g001 [--plan PLAN.json]
    python spark/jobs/stream_wide.py --all-groups --available-now

argparse -> settings -> widehouse.stream.spark.job.run_stream -> exit code; the same as
``widehouse stream`` (both parse and resolve their arguments with :mod:`widehouse.stream.options`).
"""

from __future__ import annotations

import argparse
import logging
import sys

from widehouse.errors import ConfigError, WidehouseError
from widehouse.settings import load_settings
from widehouse.stream.options import add_arguments, resolve_run
from widehouse.stream.spark.job import run_stream


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="stream_wide.py", description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        settings = load_settings()
        groups, options = resolve_run(args, settings.state_dir)
        return run_stream(settings, groups, options)
    except ConfigError as exc:
        print(f"stream_wide: configuration error: {exc}", file=sys.stderr)
        return 2
    except WidehouseError as exc:
        print(f"stream_wide: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

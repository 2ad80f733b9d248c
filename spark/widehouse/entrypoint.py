"""The frame every door into a use case shares: the ``widehouse`` CLI and the spark-submit jobs.

A door parses its arguments, configures logging, loads the settings and calls one use case; a
deliberate error (:class:`~widehouse.errors.WidehouseError`) becomes one line on stderr and an exit
code, never a traceback: 2 for a configuration error, 1 for any other.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from widehouse.errors import ConfigError, WidehouseError
from widehouse.settings import Settings, load_settings

UseCase = Callable[[argparse.Namespace, Settings], int]
"""A use case as the doors call it: the parsed arguments and the settings in, an exit code out."""

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


QUIET_LOGGERS = ("py4j",)
"""Libraries whose INFO lines are chatter, shown only with ``verbose``: py4j logs every callback
from the JVM (a stream's ``foreachBatch`` calls: lines in every group's log at every batch)."""


class _QuietRootRecords(logging.Filter):
    """Drops what the :data:`QUIET_LOGGERS` packages' own code logs below WARNING through the root
    logger, which their loggers' levels do not reach: py4j's gateway calls ``logging.info`` itself
    ("Exception while sending command.", with a traceback, as it retries; its finalizer thread
    meets a JVM already gone at the end of a run)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING:
            return True
        parts = Path(record.pathname).parts
        return not any(name in parts for name in QUIET_LOGGERS)


def configure_logging(verbose: bool = False) -> None:
    """INFO on stderr (DEBUG with ``verbose``); the :data:`QUIET_LOGGERS` at WARNING unless ``verbose``
    (their own loggers, and what their code logs through the root logger)."""
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, format=LOG_FORMAT)
    if not verbose:
        for name in QUIET_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)
        root = logging.getLogger()
        if not any(isinstance(f, _QuietRootRecords) for f in root.filters):
            root.addFilter(_QuietRootRecords())


def exit_code(prog: str, use_case: UseCase, args: argparse.Namespace) -> int:
    """Load the settings and run ``use_case``; a deliberate error is printed after ``prog`` and
    returns 2 (configuration) or 1 (any other)."""
    try:
        return use_case(args, load_settings())
    except ConfigError as exc:
        print(f"{prog}: configuration error: {exc}", file=sys.stderr)
        return 2
    except WidehouseError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 1


def run_job(
    prog: str,
    doc: str,
    add_arguments: Callable[[argparse.ArgumentParser], None],
    use_case: UseCase,
    argv: Sequence[str] | None = None,
) -> int:
    """A spark-submit job's ``main``: ``prog.py`` described by the first line of ``doc``, its
    arguments added by ``add_arguments``; argparse -> settings -> ``use_case`` -> exit code."""
    parser = argparse.ArgumentParser(prog=f"{prog}.py", description=doc.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    configure_logging()
    return exit_code(prog, use_case, args)

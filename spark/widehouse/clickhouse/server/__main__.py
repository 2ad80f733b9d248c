"""Run the service: ``python -m widehouse.clickhouse.server --data-dir DIR [--port P]``.

Other options: ``--user U --handles N --max-body-bytes B --log-file F``, caps ``--max-connections
--max-execution-time --max-memory-usage --acquire-timeout --head-timeout`` (``--help``).
The password comes from ``WIDEHOUSE_CLICKHOUSE_PASSWORD`` (never the command line); without it the
service refuses to start. Prints one ready
line (``ready: ... http://HOST:PORT ...``) on stdout once it accepts requests, serves until SIGTERM or
SIGINT, then finishes requests in flight, closes the engine and prints ``stopped``. Exit codes: 0 after
a clean stop, 2 for a configuration error, 1 when the engine or the port cannot be opened.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from pathlib import Path
from types import FrameType

from widehouse.clickhouse.server.config import (
    DEFAULT_ACQUIRE_TIMEOUT,
    DEFAULT_HANDLES,
    DEFAULT_HEAD_TIMEOUT,
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_EXECUTION_TIME,
    DEFAULT_MAX_MEMORY_USAGE,
    DEFAULT_PORT,
    PASSWORD_ENV,
    ServerConfig,
)
from widehouse.errors import ConfigError, WidehouseError


def parse_args(argv: list[str], environ: dict[str, str]) -> ServerConfig:
    parser = argparse.ArgumentParser(
        prog="python -m widehouse.clickhouse.server",
        description=f"ClickHouse HTTP interface over the chDB engine (password from ${PASSWORD_ENV}).",
    )
    parser.add_argument("--data-dir", type=Path, required=True, help="chDB data directory")
    parser.add_argument("--host", default="127.0.0.1", help="loopback address to listen on")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="port (0: any free port)")
    parser.add_argument("--user", default="default", help="the one user accepted")
    parser.add_argument(
        "--handles", type=int, default=DEFAULT_HANDLES, help="engine handles (parallel queries)"
    )
    parser.add_argument("--max-body-bytes", type=int, default=DEFAULT_MAX_BODY_BYTES, help="request body cap")
    parser.add_argument(
        "--idle-timeout", type=float, default=DEFAULT_IDLE_TIMEOUT, help="socket idle timeout (s)"
    )
    parser.add_argument(
        "--max-connections", type=int, default=DEFAULT_MAX_CONNECTIONS, help="open connections (threads) cap"
    )
    parser.add_argument(
        "--max-execution-time", type=int, default=DEFAULT_MAX_EXECUTION_TIME, help="per-query time cap (s)"
    )
    parser.add_argument(
        "--max-memory-usage", type=int, default=DEFAULT_MAX_MEMORY_USAGE, help="per-query memory cap (bytes)"
    )
    parser.add_argument(
        "--acquire-timeout", type=float, default=DEFAULT_ACQUIRE_TIMEOUT, help="wait for an engine handle (s)"
    )
    parser.add_argument(
        "--head-timeout", type=float, default=DEFAULT_HEAD_TIMEOUT, help="time to send the query text (s)"
    )
    parser.add_argument("--log-file", type=Path, default=None, help="log here instead of stderr")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    parser.add_argument(
        "--tag", default="", help="ignored; `widehouse services` finds its process by this command-line mark"
    )
    args = parser.parse_args(argv)
    _configure_logging(args.log_file, args.log_level)
    return ServerConfig(
        data_dir=args.data_dir.resolve(),
        host=args.host,
        port=args.port,
        user=args.user,
        password=environ.get(PASSWORD_ENV, ""),
        handles=args.handles,
        max_body_bytes=args.max_body_bytes,
        idle_timeout=args.idle_timeout,
        log_file=args.log_file,
        max_connections=args.max_connections,
        max_execution_time=args.max_execution_time,
        max_memory_usage=args.max_memory_usage,
        acquire_timeout=args.acquire_timeout,
        head_timeout=args.head_timeout,
    )


def _configure_logging(log_file: Path | None, level: str) -> None:
    handler: logging.Handler
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(log_file)
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler], force=True)


def main(argv: list[str] | None = None) -> int:
    from widehouse.clickhouse.server.http import ClickHouseService

    log = logging.getLogger("widehouse.clickhouse.server")
    try:
        config = parse_args(sys.argv[1:] if argv is None else argv, dict(os.environ))
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        service = ClickHouseService(config)
    except WidehouseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1

    def stop(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s: stopping", signal.Signals(signum).name)
        service.request_stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    pool = service.pool
    print(
        f"ready: ClickHouse {pool.version} (chDB) on {service.url} with {config.handles} handles, "
        f"data in {config.data_dir}",
        flush=True,
    )
    log.info("serving %s on %s (%d handles)", config.data_dir, service.url, config.handles)
    service.run()
    log.info("stopped")
    print("stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

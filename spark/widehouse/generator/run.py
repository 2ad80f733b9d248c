"""``generate(settings, options)``: create topics, publish the traffic, write the manifest."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from widehouse.catalog.eventtime import iso_utc
from widehouse.catalog.loader import load_catalog
from widehouse.catalog.model import Catalog
from widehouse.errors import ConfigError, PulsarError
from widehouse.generator.core import Chunk, TrafficGenerator
from widehouse.generator.manifest import Manifest
from widehouse.generator.options import GenerateOptions
from widehouse.pulsar.admin import PulsarAdmin
from widehouse.pulsar.topics import TopicName
from widehouse.settings import Settings

_log = logging.getLogger("widehouse.generator")


Progress = Callable[[int, int | None, float], None]
"""Called as messages go out: (messages so far, the total if known, seconds since the start)."""


def generate(
    settings: Settings,
    options: GenerateOptions,
    catalog: Catalog | None = None,
    progress: Progress | None = None,
    *,
    stop: threading.Event | None = None,
) -> Manifest:
    """Generate and (unless ``options.dry_run``) publish the traffic; return (and save) the manifest.

    ``progress``: told after every chunk of messages generated (dry run) or handed to the client.
    ``stop``: once set, publishing ends after the chunk being sent (a paced chunk of
    ``options.chunk_size`` messages lasts chunk_size / rate seconds); chunks are then made one at a
    time as they are sent, so the manifest accounts exactly the messages sent (``run.stopped``)."""
    options = options.validate()
    if stop is not None and (options.pregenerate or options.dry_run):
        raise ConfigError(
            f"stop needs a publishing run that makes chunks as it sends them, not pregenerate="
            f"{options.pregenerate} dry_run={options.dry_run}"
        )
    catalog = catalog or load_catalog(settings.schemas_dir)
    if options.tenant_suffix:
        catalog = catalog.relocated(options.tenant_suffix)
    now_ms = int(time.time() * 1000)
    generator = TrafficGenerator(catalog, options, options.base_time_ms or now_ms)
    if not options.dry_run:
        _check_base_time(generator.base_ms, now_ms, catalog, options)
    topic_names = {t.origin: str(t.name) for t in generator.topics}

    if options.dry_run:
        made, start = 0, time.monotonic()
        for chunk in generator.chunks():
            made += len(chunk)
            if progress is not None:
                progress(made, options.count, time.monotonic() - start)
        manifest = generator.manifest({"dry_run": True, "topic_names": topic_names, "exact": True})
    else:
        manifest = _publish(settings, options, generator, topic_names, progress, stop=stop)
    if options.manifest_path is not None:
        manifest.save(options.manifest_path)
    return manifest


def _check_base_time(base_ms: int, now_ms: int, catalog: Catalog, options: GenerateOptions) -> None:
    rules = catalog.rules
    behind = now_ms - base_ms
    allowed = rules.lateness_ms - options.max_delay_ms - options.timing_margin_ms
    if behind > allowed:
        raise ConfigError(
            f"--base-time {iso_utc(base_ms)} is {behind // 1000} s behind now: its events would be late "
            f"(lateness {rules.lateness_ms // 1000} s). Publish with a base time near now, or use --dry-run"
        )
    if -behind > rules.max_future_ms:
        raise ConfigError(
            f"--base-time {iso_utc(base_ms)} is in the future beyond max_future "
            f"({rules.max_future_ms // 1000} s): its events would be quarantined"
        )


def _publish(
    settings: Settings,
    options: GenerateOptions,
    generator: TrafficGenerator,
    topic_names: dict[str, str],
    progress: Progress | None = None,
    *,
    stop: threading.Event | None = None,
) -> Manifest:
    from widehouse.generator.publisher import Publisher

    names = [t.name for t in generator.topics]
    partitions = _partitions(settings, options, generator, names)
    chunks: Iterable[Chunk]
    if options.pregenerate:
        chunks = list(generator.chunks())
    elif stop is not None:  # no chunk made ahead: each one made is sent
        chunks = generator.chunks()
    else:
        chunks = _background(generator)
    publisher = Publisher(settings.pulsar, names, partitions)
    started_ms = int(time.time() * 1000)
    start = time.monotonic()
    paced = options.rate > 0
    interrupted = stopped = False
    try:
        total = options.count or (int(options.rate * options.duration_s) if options.duration_s else None)
        tick = None if progress is None else (lambda sent: progress(sent, total, time.monotonic() - start))
        for chunk in chunks:
            publisher.send(chunk, start if paced else None, tick)
            if stop is not None and stop.is_set():
                stopped = publisher.stats.sent < generator.total
                break  # before the next chunk is made (and accounted)
        if tick is not None:
            tick(publisher.stats.sent)
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        publisher.close()
        elapsed = time.monotonic() - start
        stats = publisher.stats
        behind = started_ms - generator.base_ms
        if not paced:  # everything was due at once: the lag is the whole run
            stats.max_lag_ms = int(elapsed * 1000)
        worst_ms = stats.max_lag_ms + options.max_delay_ms + max(0, behind)
        exact = (
            not interrupted and stats.failed == 0 and worst_ms <= generator.catalog.rules.lateness_ms - 60_000
        )
        run: dict[str, Any] = {
            "dry_run": False,
            "started_at": iso_utc(started_ms),
            "started_ms": started_ms,
            "elapsed_s": round(elapsed, 3),
            "sent": stats.sent,
            "failed": stats.failed,
            "first_error": stats.first_error,
            "rate_achieved": round(stats.sent / elapsed, 1) if elapsed > 0 else None,
            "max_lag_ms": stats.max_lag_ms,
            "exact": exact,
            "interrupted": interrupted,
            "stopped": stopped,
            "topic_names": topic_names,
            "partitions": {str(n): p for n, p in zip(names, partitions, strict=True)},
        }
    if stats.failed:
        raise PulsarError(f"{stats.failed} messages failed to publish; first error: {stats.first_error}")
    if not exact:
        _log.warning(
            "publishing fell %d ms behind schedule: some good events may count as late; "
            "the manifest says exact=false",
            stats.max_lag_ms,
        )
    return generator.manifest(run)


def _partitions(
    settings: Settings, options: GenerateOptions, generator: TrafficGenerator, names: list[TopicName]
) -> list[int]:
    counts = []
    with PulsarAdmin(settings.pulsar) as admin:
        for topic, name in zip(generator.topics, names, strict=True):
            if options.create_topics:
                wanted = options.partitions or topic.traffic.partitions
                counts.append(admin.ensure_partitions(name, wanted))
                continue
            count = admin.partition_count(name)
            if count == 0 and not _exists(admin, name):
                raise PulsarError(f"topic {name} does not exist; create it with --create-topics")
            counts.append(count)
    return counts


def _exists(admin: PulsarAdmin, name: TopicName) -> bool:
    """A non-partitioned topic exists (a missing namespace means no)."""
    try:
        return str(name) in admin.list_topics(name.full_namespace)
    except PulsarError:
        return False


def _background(generator: TrafficGenerator, depth: int = 4) -> Iterator[Chunk]:
    """Generate chunks on a thread, at most ``depth`` ahead of the sender.

    The client's ``send_async`` releases the GIL while the C++ client batches a message, so Python
    generation on this thread overlaps with sending. An error on the thread is raised here.
    """
    handoff: queue.Queue[Chunk | BaseException | None] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for chunk in generator.chunks():
                while not stop.is_set():
                    try:
                        handoff.put(chunk, timeout=0.5)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            handoff.put(None)
        except BaseException as exc:  # handed to the consumer, which re-raises it
            handoff.put(exc)

    thread = threading.Thread(target=produce, name="widehouse-generator", daemon=True)
    thread.start()
    try:
        while True:
            item = handoff.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        thread.join(timeout=5)

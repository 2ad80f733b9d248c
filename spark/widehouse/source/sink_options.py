"""Options and input columns of the ``pulsar`` sink (``df.write`` / ``writeStream.format("pulsar")``).

Columns: ``value`` (binary or string, required; null sends a null value), and optionally
``__topic`` (string: the row's topic), ``__key`` (string), ``__eventTime`` (timestamp),
``__properties`` (map<string,string>). ``__messageId`` and ``__publishTime`` (what the source
yields) are ignored, so a frame read with the source can be written back; any other column is an
error (a typo such as ``__topics`` would otherwise be dropped silently).

Options (case-insensitive; every error names the option and value; booleans and integers are read
by :mod:`widehouse.contracts.values`, as in the source and the settings):

- ``topic``: the topic of rows without a ``__topic`` column (or where it is null).
- ``serviceUrl``, ``adminUrl``, ``authToken``: default to the settings (``WIDEHOUSE_PULSAR_*``).
- ``requireExactlyOnce`` (``false``): refuse to write to a topic whose broker does not deduplicate
  (see :mod:`widehouse.pulsar.dedup`); otherwise such a topic is written at-least-once, with a warning.
- ``producerNamePrefix`` (``widehouse-sink``): producer names are ``<prefix>-<query id>-<partition>``.
- ``maxProducersPerTask`` (64): producers a task keeps open (least recently used closed first).
- ``batchingMaxMessages`` (1000: messages per producer batch; batches are cut by the sink, see
  :mod:`.sink`), ``maxPendingMessages`` (5000), ``compression`` (``lz4``; ``none``, ``zstd``,
  ``zlib``, ``snappy``).

Spark passes ``checkpointLocation``, ``queryName`` and ``path`` along; they are accepted and unused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from widehouse.contracts.values import ValueTextError, parse_bool, parse_int
from widehouse.errors import ConfigError, PulsarError
from widehouse.pulsar.topics import TopicName
from widehouse.settings import PulsarSettings, mask_url
from widehouse.source.option_text import canonical_option

KNOWN = (
    "topic",
    "serviceUrl",
    "adminUrl",
    "authToken",
    "requireExactlyOnce",
    "producerNamePrefix",
    "maxProducersPerTask",
    "batchingMaxMessages",
    "maxPendingMessages",
    "compression",
)
PASSED_BY_SPARK = ("checkpointlocation", "queryname", "path")
_CANONICAL = {k.lower(): k for k in KNOWN}
COMPRESSIONS = {"none": "NONE", "lz4": "LZ4", "zstd": "ZSTD", "zlib": "ZLib", "snappy": "SNAPPY"}

INPUT_TYPES = {
    "value": ("binary", "string"),
    "__topic": ("string",),
    "__key": ("string",),
    "__eventTime": ("timestamp", "timestamp_ntz"),
    "__properties": ("map<string,string>",),
}
IGNORED_COLUMNS = ("__messageId", "__publishTime")


@dataclass(frozen=True)
class SinkOptions:
    """Validated sink options: plain values, pickled to every write task."""

    pulsar: PulsarSettings
    topic: str | None = None
    require_exactly_once: bool = False
    producer_prefix: str = "widehouse-sink"
    max_producers: int = 64
    batch_max_messages: int = 1000
    max_pending: int = 5000
    compression: str = "LZ4"
    columns: tuple[str, ...] = field(default=("value",))
    """The input columns the sink uses, in the frame's order (set by :func:`check_columns`)."""


def parse_sink_options(options: Mapping[str, str], defaults: PulsarSettings | None = None) -> SinkOptions:
    values: dict[str, str] = {}
    for key, value in options.items():
        if key.lower() in PASSED_BY_SPARK:
            continue
        canonical = canonical_option(key, _CANONICAL, KNOWN, "the pulsar sink")
        if str(value).strip():
            values[canonical] = str(value).strip()
    topic = values.get("topic")
    if topic is not None:
        try:
            name = TopicName.parse(topic)
        except PulsarError as exc:
            raise ConfigError(f"option topic: {exc}") from exc
        if name.partition_index is not None:
            raise ConfigError(f"option topic={topic!r}: write to the partitioned topic, not one partition")
    prefix = values.get("producerNamePrefix", "widehouse-sink")
    if not re.fullmatch(r"[A-Za-z0-9_.\-]{1,64}", prefix):
        raise ConfigError(f"option producerNamePrefix={prefix!r}: use letters, digits, '_', '.', '-'")
    compression = values.get("compression", "lz4").lower()
    if compression not in COMPRESSIONS:
        raise ConfigError(f"option compression={compression!r}: use one of {', '.join(COMPRESSIONS)}")
    return SinkOptions(
        pulsar=_pulsar(values, defaults),
        topic=topic,
        require_exactly_once=_boolean(values, "requireExactlyOnce", False),
        producer_prefix=prefix,
        max_producers=_integer(values, "maxProducersPerTask", 64, 1),
        batch_max_messages=_integer(values, "batchingMaxMessages", 1000, 1),
        max_pending=_integer(values, "maxPendingMessages", 5000, 1),
        compression=COMPRESSIONS[compression],
    )


def check_columns(columns: Sequence[tuple[str, str]], options: SinkOptions) -> tuple[str, ...]:
    """Check the frame's (name, simple type) columns; returns the names the sink reads, in order."""
    names = [name for name, _type in columns]
    if "value" not in names:
        raise ConfigError(f"the pulsar sink needs a column named value (binary or string); got {names}")
    used = []
    for name, type_name in columns:
        if name in IGNORED_COLUMNS:
            continue
        allowed = INPUT_TYPES.get(name)
        if allowed is None:
            raise ConfigError(
                f"the pulsar sink does not know column {name!r}; it writes {', '.join(INPUT_TYPES)} "
                f"(and ignores {', '.join(IGNORED_COLUMNS)}); drop or rename it"
            )
        if type_name.replace(" ", "") not in allowed:
            raise ConfigError(
                f"column {name} of the pulsar sink must be {' or '.join(allowed)}, not {type_name}"
            )
        used.append(name)
    if "__topic" not in used and options.topic is None:
        raise ConfigError("the pulsar sink needs option topic, or a __topic column naming each row's topic")
    return tuple(used)


def _pulsar(values: dict[str, str], defaults: PulsarSettings | None) -> PulsarSettings:
    service_url, admin_url = values.get("serviceUrl"), values.get("adminUrl")
    if defaults is None and (service_url is None or admin_url is None):
        from widehouse.settings import load_settings

        defaults = load_settings().pulsar
    if service_url is not None and not re.match(r"pulsar(\+ssl)?://[^/\s]+", service_url):
        raise ConfigError(f"option serviceUrl={mask_url(service_url)!r} must be pulsar://host:port")
    if admin_url is not None and not re.match(r"https?://[^/\s]+", admin_url):
        raise ConfigError(f"option adminUrl={mask_url(admin_url)!r} must be http(s)://host:port")
    token = values.get("authToken")
    return PulsarSettings(
        service_url=service_url or (defaults.service_url if defaults else ""),
        admin_url=(admin_url or (defaults.admin_url if defaults else "")).rstrip("/"),
        auth_token=token if token is not None else (defaults.auth_token if defaults else None),
    )


def _boolean(options: dict[str, str], name: str, default: bool) -> bool:
    raw = options.get(name)
    if raw is None:
        return default
    try:
        return parse_bool(raw, f"option {name}")
    except ValueTextError as exc:
        raise ConfigError(str(exc)) from None


def _integer(options: dict[str, str], name: str, default: int, minimum: int) -> int:
    raw = options.get(name)
    if raw is None:
        return default
    try:
        return parse_int(raw, f"option {name}", minimum=minimum)
    except ValueTextError as exc:
        raise ConfigError(str(exc)) from None

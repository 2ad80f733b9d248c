"""Options of the ``pulsar`` source: parsed and validated once, into a frozen, picklable object.

Every error names the option and its value. Spark hands options over case-insensitively; names
below are the canonical camelCase. Booleans, integers and durations are read by
:mod:`widehouse.contracts.values` (the same text means the same value as in the settings and the CLI:
booleans ``true/false``, ``1/0``, ``yes/no``, ``on/off``; durations ``500ms``, ``30s``, ``10m``,
``1h``, ``7d``, a bare number being milliseconds).

- ``topics``: comma-separated full topic names (a ``-partition-N`` name reads one partition); or
  ``topicsPattern`` + ``namespaces``: a regex over the topics of those namespaces
  (``tenant/ns,...``), matched against the local name, or the full name if it contains ``://``.
- ``serviceUrl``, ``adminUrl``, ``authToken``: default to the settings (``WIDEHOUSE_PULSAR_*``).
- ``startingOffsets``: ``earliest``, ``latest`` (the stream default; batch: ``earliest``) or JSON
  per topic / partition (a message id is the first message read). ``endingOffsets`` (batch only):
  ``latest`` (default) or JSON (a message id is the first message *not* read).
- ``failOnDataLoss`` (default ``true``): fail when messages were deleted before being read, or a
  topic with unread messages was deleted / recreated; ``false`` logs a warning and goes on.
- Admission control: ``maxMessagesPerTrigger`` (total per micro-batch, split by backlog),
  ``minMessagesPerTopic`` (floor per topic, default 1000, so no topic starves),
  ``maxMessagesPerTopic`` (cap: a number, or JSON ``{"<topic>": n, "*": n}``),
  ``minMessagesPerTrigger`` + ``maxTriggerDelay`` (wait for that many messages, at most that long,
  default 15m), ``maxCutPartitions`` (64: beyond that many partitions read partly in one trigger,
  whole partitions take turns instead; each partly read one costs the driver a broker lookup),
  ``cutSlack`` (``0``, in ``[0, 0.5]``: a partly read partition may end up to that share of its
  take short, at an entry boundary, when that saves the lookup its further probes; under
  ``AvailableNow`` only as far as it costs the drain no batch; the streaming job sets
  ``WIDEHOUSE_STREAM_CUT_SLACK``).
- ``startAfter`` (streams): JSON ``{"<topic>": {"<partition>": "<ledger:entry[:batch]>|<index>"}}``,
  marks handed over from another slot group: a partition new to the query starts right after its
  mark instead of at ``startingOffsets`` / the earliest message (:mod:`.handover`).
- Subscriptions: ``appId`` (required for streams; names the durable subscriptions
  ``<subscriptionPrefix><appId>``), ``subscriptionPrefix`` (``widehouse-``),
  ``durableSubscription`` (``true``), ``heartbeatInterval`` (``10m``).
- Tasks: ``messagesPerTask`` (100000), ``minTasks`` (1), ``maxPartitionsPerTask`` (256).
- ``schema``: ``raw`` (default: ``value`` is the payload's bytes) or ``registry`` (``topics`` only:
  decode ``value`` by the topics' registered JSON / Avro schema, see :mod:`.decode`).
- Reading: ``readTimeout`` (``120s``: longest wait for a message that must exist),
  ``receiverQueueSize`` (2000), ``arrowBatchRows`` (10000); ``adminConcurrency`` (16 parallel admin
  calls on the driver side).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from widehouse.contracts import values
from widehouse.contracts.identity import SUBSCRIPTION_PREFIX, validate_app_id
from widehouse.errors import ConfigError, PulsarError
from widehouse.pulsar.positions import EARLIEST, Mark, TopicPartition
from widehouse.pulsar.topics import TopicName
from widehouse.settings import PulsarSettings, mask_url
from widehouse.settings.parsers import MAX_CUT_SLACK
from widehouse.source.admission import Limits
from widehouse.source.broker import TopicSelector
from widehouse.source.handover import parse_marks
from widehouse.source.offsets import LATEST, OffsetSpec, parse_offset_spec
from widehouse.source.option_text import canonical_option

T = TypeVar("T")

KNOWN = (
    "topics",
    "topic",
    "topicsPattern",
    "namespaces",
    "serviceUrl",
    "adminUrl",
    "authToken",
    "startingOffsets",
    "endingOffsets",
    "failOnDataLoss",
    "maxMessagesPerTrigger",
    "minMessagesPerTopic",
    "maxMessagesPerTopic",
    "minMessagesPerTrigger",
    "maxTriggerDelay",
    "maxCutPartitions",
    "cutSlack",
    "startAfter",
    "appId",
    "subscriptionPrefix",
    "durableSubscription",
    "heartbeatInterval",
    "messagesPerTask",
    "minTasks",
    "maxPartitionsPerTask",
    "readTimeout",
    "receiverQueueSize",
    "adminConcurrency",
    "arrowBatchRows",
    "schema",
)
_CANONICAL = {k.lower(): k for k in KNOWN}
NO_LIMIT = 1 << 62
"""A ReadMaxRows this large means "no total budget" (per-topic caps still apply)."""


@dataclass(frozen=True)
class ReadConfig:
    """What an executor needs to read (plain values, shipped with every task)."""

    service_url: str
    auth_token: str | None = field(default=None, repr=False)
    read_timeout_ms: int = 120_000
    receiver_queue_size: int = 2000
    fail_on_data_loss: bool = True
    arrow_batch_rows: int = 10_000
    metadata: bool = True
    """False: ``__key``, ``__eventTime`` and ``__properties`` are left null (three calls into the
    client per message a reader that needs only the payload, topic, id and publish time skips)."""


@dataclass(frozen=True)
class SourceOptions:
    selector: TopicSelector
    pulsar: PulsarSettings
    starting: OffsetSpec
    starting_text: str
    ending: OffsetSpec | None
    fail_on_data_loss: bool
    limits: Limits
    app_id: str | None
    subscription_prefix: str
    durable_subscription: bool
    heartbeat_interval_s: float
    messages_per_task: int
    min_tasks: int
    max_partitions_per_task: int
    read_timeout_ms: int
    receiver_queue_size: int
    admin_concurrency: int
    arrow_batch_rows: int
    value_schema: str = "raw"
    """``raw`` or ``registry`` (decode by the registered schema)."""
    start_after: Mapping[TopicPartition, Mark] = field(default_factory=dict)
    """Handed-over marks: where partitions new to a streaming query start (``startAfter``)."""

    @property
    def read_config(self) -> ReadConfig:
        return ReadConfig(
            service_url=self.pulsar.service_url,
            auth_token=self.pulsar.auth_token,
            read_timeout_ms=self.read_timeout_ms,
            receiver_queue_size=self.receiver_queue_size,
            fail_on_data_loss=self.fail_on_data_loss,
            arrow_batch_rows=self.arrow_batch_rows,
        )

    def for_stream(self) -> SourceOptions:
        """Check what a streaming query needs (raises :class:`ConfigError`)."""
        if self.ending is not None:
            raise ConfigError("option endingOffsets is for batch reads (spark.read) only")
        if self.durable_subscription and not self.app_id:
            raise ConfigError(
                "option appId is required for a streaming query (it names the durable subscriptions "
                "that keep the app's unread data in Pulsar); or set durableSubscription=false"
            )
        return self


class _Opts:
    def __init__(self, options: Mapping[str, str]) -> None:
        self.values: dict[str, str] = {}
        for key, value in options.items():
            self.values[canonical_option(key, _CANONICAL, KNOWN, "the pulsar source")] = str(value)

    def get(self, name: str) -> str | None:
        value = self.values.get(name)
        return value.strip() if value is not None and value.strip() else None

    def integer(self, name: str, default: int | None, minimum: int = 0) -> int | None:
        raw = self.get(name)
        if raw is None:
            return default
        return _checked(values.parse_int, raw, f"option {name}", minimum=minimum)

    def boolean(self, name: str, default: bool) -> bool:
        raw = self.get(name)
        if raw is None:
            return default
        return _checked(values.parse_bool, raw, f"option {name}")

    def fraction(self, name: str, default: float, maximum: float) -> float:
        raw = self.get(name)
        if raw is None:
            return default
        return _checked(values.parse_float, raw, f"option {name}", minimum=0, maximum=maximum)

    def duration_ms(self, name: str, default: int) -> int:
        raw = self.get(name)
        if raw is None:
            return default
        return int(_checked(values.parse_duration_ms, raw, f"option {name}"))


def _checked(parse: Callable[..., T], raw: str, name: str, **bounds: float) -> T:
    """``parse(raw)`` with a bad value raised as a :class:`ConfigError` naming the option."""
    try:
        return parse(raw, name, **bounds)
    except values.ValueTextError as exc:
        raise ConfigError(str(exc)) from None


def parse_options(
    options: Mapping[str, str], pulsar_defaults: PulsarSettings | None = None, batch: bool = False
) -> SourceOptions:
    """Validate the source's options; ``pulsar_defaults`` default to the widehouse settings."""
    opts = _Opts(options)
    selector = _selector(opts)
    pulsar = _pulsar_settings(opts, pulsar_defaults)
    starting_text = opts.get("startingOffsets") or (EARLIEST if batch else LATEST)
    starting = parse_offset_spec(starting_text, "startingOffsets", default=EARLIEST)
    ending_text = opts.get("endingOffsets")
    ending = None
    if ending_text is not None:
        ending = parse_offset_spec(ending_text, "endingOffsets", allowed=(LATEST,), default=LATEST)
    elif batch:
        ending = parse_offset_spec(LATEST, "endingOffsets", allowed=(LATEST,), default=LATEST)
    app_id = opts.get("appId")
    if app_id is not None:
        validate_app_id(app_id)
    start_after_text = opts.get("startAfter")
    if start_after_text is not None and batch:
        raise ConfigError("option startAfter is for streaming queries (spark.readStream) only")
    prefix = opts.get("subscriptionPrefix") or SUBSCRIPTION_PREFIX
    if not re.fullmatch(r"[A-Za-z0-9_.\-]{1,50}", prefix):
        raise ConfigError(f"option subscriptionPrefix={prefix!r}: use letters, digits, '_', '.', '-'")
    return SourceOptions(
        selector=selector,
        pulsar=pulsar,
        starting=starting,
        starting_text=starting_text,
        ending=ending,
        fail_on_data_loss=opts.boolean("failOnDataLoss", True),
        limits=_limits(opts, selector),
        app_id=app_id,
        subscription_prefix=prefix,
        durable_subscription=opts.boolean("durableSubscription", True),
        heartbeat_interval_s=opts.duration_ms("heartbeatInterval", 600_000) / 1000,
        messages_per_task=opts.integer("messagesPerTask", 100_000, minimum=1) or 100_000,
        min_tasks=opts.integer("minTasks", 1, minimum=1) or 1,
        max_partitions_per_task=opts.integer("maxPartitionsPerTask", 256, minimum=1) or 256,
        read_timeout_ms=max(1, opts.duration_ms("readTimeout", 120_000)),
        receiver_queue_size=opts.integer("receiverQueueSize", 2000, minimum=1) or 2000,
        admin_concurrency=opts.integer("adminConcurrency", 16, minimum=1) or 16,
        arrow_batch_rows=opts.integer("arrowBatchRows", 10_000, minimum=1) or 10_000,
        value_schema=_value_schema(opts, selector),
        start_after=parse_marks(start_after_text) if start_after_text is not None else {},
    )


def _value_schema(opts: _Opts, selector: TopicSelector) -> str:
    value = (opts.get("schema") or "raw").lower()
    if value not in ("raw", "registry"):
        raise ConfigError(f"option schema={value!r} must be raw or registry")
    if value == "registry" and not selector.topics:
        raise ConfigError("option schema=registry needs option topics (the schema is looked up per topic)")
    return value


def _selector(opts: _Opts) -> TopicSelector:
    topics_text = opts.get("topics") or opts.get("topic")
    pattern = opts.get("topicsPattern")
    namespaces_text = opts.get("namespaces")
    if topics_text and pattern:
        raise ConfigError("options topics and topicsPattern exclude each other; give one")
    if not topics_text and not pattern:
        raise ConfigError("option topics (comma-separated full topic names) or topicsPattern is required")
    if topics_text:
        topics = tuple(t.strip() for t in topics_text.split(",") if t.strip())
        for topic in topics:
            try:
                name = TopicName.parse(topic)
            except PulsarError as exc:
                raise ConfigError(f"option topics: {exc}") from exc
            if name.domain != "persistent":
                raise ConfigError(f"option topics: {topic} is not persistent (positions need persistence)")
        if namespaces_text:
            raise ConfigError("option namespaces goes with topicsPattern, not with topics")
        return TopicSelector(topics=topics)
    assert pattern is not None
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ConfigError(f"option topicsPattern={pattern!r} is not a regular expression: {exc}") from exc
    if not namespaces_text:
        raise ConfigError("option topicsPattern needs option namespaces (comma-separated tenant/namespace)")
    namespaces = tuple(n.strip() for n in namespaces_text.split(",") if n.strip())
    for namespace in namespaces:
        if not re.fullmatch(r"[A-Za-z0-9_.\-=:]+/[A-Za-z0-9_.\-=:]+", namespace):
            raise ConfigError(f"option namespaces: {namespace!r} is not tenant/namespace")
    return TopicSelector(pattern=pattern, namespaces=namespaces)


def _pulsar_settings(opts: _Opts, defaults: PulsarSettings | None) -> PulsarSettings:
    service_url = opts.get("serviceUrl")
    admin_url = opts.get("adminUrl")
    token = opts.get("authToken")
    if defaults is None and (service_url is None or admin_url is None):
        from widehouse.settings import load_settings

        defaults = load_settings().pulsar
    if service_url is not None and not re.match(r"pulsar(\+ssl)?://[^/\s]+", service_url):
        shown = mask_url(service_url)
        raise ConfigError(f"option serviceUrl={shown!r} must be pulsar://host:port or pulsar+ssl://")
    if admin_url is not None and not re.match(r"https?://[^/\s]+", admin_url):
        raise ConfigError(f"option adminUrl={mask_url(admin_url)!r} must be http(s)://host:port")
    assert defaults is not None or (service_url and admin_url)
    return PulsarSettings(
        service_url=service_url or (defaults.service_url if defaults else ""),
        admin_url=(admin_url or (defaults.admin_url if defaults else "")).rstrip("/"),
        auth_token=token if token is not None else (defaults.auth_token if defaults else None),
    )


def _limits(opts: _Opts, selector: TopicSelector) -> Limits:
    max_per_topic: dict[str, int] = {}
    default_cap: int | None = None
    raw_caps = opts.get("maxMessagesPerTopic")
    if raw_caps is not None:
        if raw_caps.startswith("{"):
            try:
                data = json.loads(raw_caps)
            except ValueError as exc:
                raise ConfigError(f"option maxMessagesPerTopic is not valid JSON: {exc}") from exc
            if not isinstance(data, dict):
                raise ConfigError("option maxMessagesPerTopic must be a number or a JSON object")
            for topic, cap in data.items():
                if not isinstance(cap, int) or isinstance(cap, bool) or cap < 0:
                    raise ConfigError(f"option maxMessagesPerTopic: {topic} needs a count >= 0, got {cap!r}")
                if topic == "*":
                    default_cap = cap
                    continue
                try:
                    name = TopicName.parse(topic)
                except PulsarError as exc:
                    raise ConfigError(f"option maxMessagesPerTopic: {exc}") from exc
                max_per_topic[str(name.base)] = cap
        else:
            default_cap = opts.integer("maxMessagesPerTopic", None, minimum=1)
    min_trigger = opts.integer("minMessagesPerTrigger", None, minimum=1)
    delay = opts.duration_ms("maxTriggerDelay", 900_000)
    if opts.get("maxTriggerDelay") is not None and min_trigger is None:
        raise ConfigError("option maxTriggerDelay goes with minMessagesPerTrigger")
    return Limits(
        max_per_trigger=opts.integer("maxMessagesPerTrigger", None, minimum=1),
        min_per_topic=opts.integer("minMessagesPerTopic", 1000, minimum=0) or 0,
        max_per_topic=max_per_topic or None,
        default_max_per_topic=default_cap,
        min_per_trigger=min_trigger,
        max_trigger_delay_ms=delay,
        max_cuts=opts.integer("maxCutPartitions", 64, minimum=1) or 64,
        cut_slack=opts.fraction("cutSlack", 0.0, maximum=MAX_CUT_SLACK),
    )


def source_options(pulsar: PulsarSettings, topics: Iterable[str], **extra: object) -> dict[str, str]:
    """Options for ``spark.readStream.format("pulsar")`` from settings, topics and extras.

    ``extra`` keys are option names (``appId="group-7", maxMessagesPerTrigger=500_000,
    startingOffsets="earliest"``); booleans become ``true``/``false``, dicts become JSON. With no
    topics, give ``topicsPattern=...`` and ``namespaces=...`` instead. The result is validated
    here, so a bad value fails in the caller, not inside Spark.
    """
    options: dict[str, str] = {"serviceUrl": pulsar.service_url, "adminUrl": pulsar.admin_url}
    names = list(topics)
    if names:
        options["topics"] = ",".join(names)
    if pulsar.auth_token:
        options["authToken"] = pulsar.auth_token
    for key, value in extra.items():
        if value is None:
            continue
        if isinstance(value, bool):
            options[key] = "true" if value else "false"
        elif isinstance(value, dict):
            options[key] = json.dumps(value)
        else:
            options[key] = str(value)
    parse_options(options, pulsar)
    return options

"""Options of the traffic generator, validated at the boundary (errors name the option)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from widehouse.errors import ConfigError
from widehouse.generator.badinput import BAD_CLASSES

FIRST_UID = 10_000_001


@dataclass(frozen=True)
class GenerateOptions:
    """What to generate. ``count`` or ``duration_s`` (with a ``rate``) sets how many messages.

    Generation is deterministic for (catalog, seed, base_time_ms and every option that shapes
    traffic); only publish timestamps differ between runs.
    """

    count: int | None = None
    """Total messages (all topics, good and bad)."""
    duration_s: float | None = None
    """Run this long at ``rate`` (count = messages the rate profile sends in that time)."""
    rate: float = 1000.0
    """Messages per second over all topics; 0 = as fast as possible (needs ``count``)."""
    seed: int = 1
    base_time_ms: int | None = None
    """Event time of the first message (epoch ms); default: now. Publishing needs it near now."""
    users: int = 1000
    """Distinct keys: uid = 10000001 + i (``u<uid>`` for string keys)."""
    user_skew: float = 1.0
    """Zipf exponent of activity over users (0 = uniform)."""
    topic_skew: float | None = None
    """Zipf exponent over topics ranked by catalog weight; None = the catalog's traffic weights."""
    topics: str | None = None
    """Regular expression over catalog topic names: only matching topics get traffic."""
    bad_rate: float = 0.01
    """Share of messages that are bad input, spread evenly over ``bad_classes``."""
    bad_classes: tuple[str, ...] = BAD_CLASSES
    late_rate: float = 0.005
    """Share of messages that are late (event time hours behind)."""
    burst_factor: float = 1.0
    """Rate multiplier during bursts (1 = no bursts)."""
    burst_every_s: float = 60.0
    burst_length_s: float = 10.0
    variants: int = 256
    """Distinct bodies per topic (field values are drawn once per variant)."""
    max_delay_ms: int = 30_000
    """Largest client-side delay between an event and its send (realistic jitter)."""
    timing_margin_ms: int = 5 * 60_000
    """How far publishing may fall behind schedule with good events still on time: publishing refuses
    a base time more than lateness - ``max_delay_ms`` - this behind now. Lower it only for small
    unpaced runs (tests that must wait for hour end + lateness in real time)."""
    tenant_suffix: str | None = None
    """Publish to ``<tenant>-<suffix>`` instead of the catalog's tenants (tests, demos)."""
    create_topics: bool = False
    partitions: int | None = None
    """With create_topics: partitions for every topic (default: the catalog's hints)."""
    manifest_path: Path | None = None
    dry_run: bool = False
    """Generate and compute the manifest without publishing."""
    pregenerate: bool = False
    """Serialize every message before the first send (fastest publishing; memory ~ count x size)."""
    chunk_size: int = field(default=32_768, repr=False)

    def validate(self) -> GenerateOptions:  # noqa: PLR0912 - one check per option
        """Check every option; raises ConfigError naming the first bad one. Returns self."""
        if self.count is None and self.duration_s is None:
            raise ConfigError("give --count or --duration")
        if self.count is not None and self.duration_s is not None:
            raise ConfigError("give --count or --duration, not both")
        if self.count is not None and not 0 < self.count <= 10**10:
            raise ConfigError(f"--count {self.count} must be between 1 and 10^10")
        if self.duration_s is not None:
            if not (math.isfinite(self.duration_s) and self.duration_s > 0):
                raise ConfigError(f"--duration {self.duration_s} must be a positive number of seconds")
            if self.rate == 0:
                raise ConfigError(
                    "--duration needs a --rate above 0 (rate 0 means as fast as possible; use --count)"
                )
        if not (math.isfinite(self.rate) and self.rate >= 0):
            raise ConfigError(f"--rate {self.rate} must be >= 0 messages per second")
        if not 1 <= self.users <= 10_000_000:
            raise ConfigError(f"--users {self.users} must be between 1 and 10,000,000")
        if not 0 <= self.user_skew <= 5:
            raise ConfigError(f"--user-skew {self.user_skew} must be between 0 and 5")
        if self.topic_skew is not None and not 0 <= self.topic_skew <= 5:
            raise ConfigError(f"--topic-skew {self.topic_skew} must be between 0 and 5")
        for name, value in (("--bad-rate", self.bad_rate), ("--late-rate", self.late_rate)):
            if not 0 <= value <= 1:
                raise ConfigError(f"{name} {value} must be between 0 and 1")
        if self.bad_rate + self.late_rate > 1:
            raise ConfigError("--bad-rate plus --late-rate must not exceed 1")
        unknown = [c for c in self.bad_classes if c not in BAD_CLASSES]
        if unknown or (self.bad_rate > 0 and not self.bad_classes):
            raise ConfigError(f"--bad-classes {unknown or '(none)'}: choose from {', '.join(BAD_CLASSES)}")
        if self.burst_factor < 1:
            raise ConfigError(f"--burst-factor {self.burst_factor} must be >= 1")
        if self.burst_factor > 1 and not 0 < self.burst_length_s < self.burst_every_s:
            raise ConfigError("--burst-length must be positive and shorter than --burst-every")
        if not 1 <= self.variants <= 100_000:
            raise ConfigError(f"--variants {self.variants} must be between 1 and 100,000")
        if not 0 <= self.max_delay_ms <= 10 * 60_000:
            raise ConfigError(f"--max-delay-ms {self.max_delay_ms} must be between 0 and 600000")
        if not 0 <= self.timing_margin_ms <= 60 * 60_000:
            raise ConfigError(f"timing_margin_ms {self.timing_margin_ms} must be between 0 and 3600000")
        if self.topics is not None:
            try:
                re.compile(self.topics)
            except re.error as exc:
                raise ConfigError(f"--topics {self.topics!r} is not a regular expression: {exc}") from exc
        if self.tenant_suffix is not None and not re.fullmatch(
            r"[a-z0-9][a-z0-9-]{0,30}", self.tenant_suffix
        ):
            raise ConfigError(
                f"--tenant-suffix {self.tenant_suffix!r}: use 1-31 lower-case letters, digits or -"
            )
        if self.partitions is not None and not 1 <= self.partitions <= 1024:
            raise ConfigError(f"--partitions {self.partitions} must be between 1 and 1024")
        if self.base_time_ms is not None and self.base_time_ms <= 0:
            raise ConfigError(f"--base-time {self.base_time_ms} must be a positive epoch time")
        if self.chunk_size < 1:
            raise ConfigError("chunk_size must be positive")
        return self


def uid_of(index: int, key_type: str = "long") -> int | str:
    """The key of user ``index`` (shared by the generator and generate-offline)."""
    uid = FIRST_UID + index
    return uid if key_type == "long" else f"u{uid}"

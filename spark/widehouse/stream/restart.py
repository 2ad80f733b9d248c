"""When a failed streaming query is restarted, and when the app gives up on it (pyspark-free).

The rule, per slot group:

- a failure schedules a restart from the checkpoint after an exponential backoff:
  ``initial * 2^(n-1)`` seconds for the n-th consecutive failure, capped at ``cap`` seconds;
- a **committed batch resets** the count: only failures in a row, with no batch committed in
  between, use up the budget (a transient outage a week ago does not count against today);
- after ``max_restarts`` consecutive restarts have failed again, the group is given up with an error
  that names it, the number of failures, the setting to change and the last error;
- a failure because Pulsar refused the credentials (an expired token, above all) is given up at
  once: every restart would be refused the same way.

Settings: ``WIDEHOUSE_STREAM_MAX_RESTARTS``, ``WIDEHOUSE_STREAM_RESTART_BACKOFF_SECONDS``,
``WIDEHOUSE_STREAM_RESTART_BACKOFF_MAX_SECONDS``. No jitter: the groups of one app fail for their
own reasons, and a restart only reads a checkpoint and asks Pulsar where partitions end.

Pure: times are passed in (``now``, seconds on any monotonic clock), so tests drive a fake clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from widehouse.errors import ConfigError
from widehouse.pulsar.auth import is_refusal
from widehouse.settings import StreamSettings


@dataclass(frozen=True)
class RestartPolicy:
    """How many consecutive failures are retried, and how long to wait before each retry."""

    max_restarts: int
    initial_s: float
    cap_s: float

    def __post_init__(self) -> None:
        if self.max_restarts < 0:
            raise ConfigError(f"restart policy: max_restarts={self.max_restarts!r} must be >= 0")
        if not 0 < self.initial_s <= self.cap_s:
            raise ConfigError(
                f"restart policy: backoff {self.initial_s!r} s must be > 0 and <= its cap {self.cap_s!r} s "
                "(WIDEHOUSE_STREAM_RESTART_BACKOFF_SECONDS <= WIDEHOUSE_STREAM_RESTART_BACKOFF_MAX_SECONDS)"
            )

    @classmethod
    def of(cls, settings: StreamSettings) -> RestartPolicy:
        return cls(settings.max_restarts, settings.restart_backoff_s, settings.restart_backoff_max_s)

    def delay(self, failures: int) -> float:
        """Seconds to wait before restarting after the ``failures``-th consecutive failure (>= 1)."""
        return min(self.cap_s, self.initial_s * 2.0 ** min(max(failures, 1) - 1, 64))


@dataclass(frozen=True)
class Restart:
    """Restart the group at ``at`` (same clock as ``now``); ``attempt`` counts consecutive restarts."""

    at: float
    attempt: int


@dataclass(frozen=True)
class GiveUp:
    """Stop restarting the group; ``message`` says why and what to change."""

    message: str


@dataclass
class RestartBook:
    """Consecutive failures and pending restarts of an app's groups (see the module docstring)."""

    policy: RestartPolicy
    failures: dict[str, int] = field(default_factory=dict)
    """Consecutive failures per group since its last committed batch."""
    pending: dict[str, float] = field(default_factory=dict)
    """Groups waiting for their restart time."""

    def committed(self, group: str) -> None:
        """A batch of ``group`` was committed: its failures no longer count."""
        self.failures.pop(group, None)

    def failed(self, group: str, error: object, now: float) -> Restart | GiveUp:
        """The group's query failed at ``now``: when to restart it, or give it up."""
        count = self.failures.get(group, 0) + 1
        self.failures[group] = count
        if is_refusal(error):  # a restart would be refused the same way, forever: say so now
            self.pending.pop(group, None)
            return GiveUp(
                f"slot group {group}: Pulsar refused the credentials (no, a rejected or an expired "
                f"token, or a role without permission); not restarted. Error: {error}"
            )
        if count > self.policy.max_restarts:
            self.pending.pop(group, None)
            return GiveUp(
                f"slot group {group} failed {count} time(s) in a row without committing a batch "
                f"(WIDEHOUSE_STREAM_MAX_RESTARTS={self.policy.max_restarts}); giving up. Last error: {error}"
            )
        at = now + self.policy.delay(count)
        self.pending[group] = at
        return Restart(at, count)

    def due(self, now: float) -> list[str]:
        """Groups whose restart time has come (removed from :attr:`pending`), sorted."""
        ready = sorted(g for g, at in self.pending.items() if at <= now)
        for group in ready:
            del self.pending[group]
        return ready

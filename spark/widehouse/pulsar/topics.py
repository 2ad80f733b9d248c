"""Pulsar topic names: parse, validate, and split into partitions."""

from __future__ import annotations

import re
from dataclasses import dataclass

from widehouse.errors import PulsarError

_PART = r"[A-Za-z0-9_][A-Za-z0-9_.\-=:]*"
_NAME_RE = re.compile(
    rf"(?P<domain>persistent|non-persistent)://(?P<tenant>{_PART})/(?P<namespace>{_PART})/(?P<local>{_PART})"
)
PARTITION_SUFFIX = "-partition-"


@dataclass(frozen=True, order=True)
class TopicName:
    """``persistent://tenant/namespace/local``; ``local`` may carry a ``-partition-N`` suffix."""

    domain: str
    tenant: str
    namespace: str
    local: str

    @classmethod
    def parse(cls, value: str) -> TopicName:
        match = _NAME_RE.fullmatch(value)  # match would let `$` pass "name\n"
        if not match:
            raise PulsarError(
                f"{value!r} is not a full Pulsar topic name; expected "
                "persistent://<tenant>/<namespace>/<topic>"
            )
        return cls(match["domain"], match["tenant"], match["namespace"], match["local"])

    def __str__(self) -> str:
        return f"{self.domain}://{self.tenant}/{self.namespace}/{self.local}"

    @property
    def full_namespace(self) -> str:
        return f"{self.tenant}/{self.namespace}"

    @property
    def rest_path(self) -> str:
        """The admin v2 path segment: ``persistent/tenant/namespace/topic``."""
        return f"{self.domain}/{self.tenant}/{self.namespace}/{self.local}"

    @property
    def partition_index(self) -> int | None:
        base, sep, index = self.local.rpartition(PARTITION_SUFFIX)
        if sep and base and index.isdigit():
            return int(index)
        return None

    @property
    def base(self) -> TopicName:
        """The partitioned topic this partition belongs to (itself if not a partition)."""
        if self.partition_index is None:
            return self
        return TopicName(self.domain, self.tenant, self.namespace, self.local.rpartition(PARTITION_SUFFIX)[0])

    def partition(self, index: int) -> TopicName:
        if index < 0:
            raise PulsarError(f"partition index must be >= 0, got {index} for {self}")
        return TopicName(self.domain, self.tenant, self.namespace, f"{self.local}{PARTITION_SUFFIX}{index}")

    def partitions(self, count: int) -> list[TopicName]:
        """The partition topics of a topic with ``count`` partitions (itself when count is 0)."""
        return [self.partition(i) for i in range(count)] if count > 0 else [self]

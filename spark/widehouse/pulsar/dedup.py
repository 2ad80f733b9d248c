"""Is Pulsar's broker-side message deduplication in force for a topic, and how to turn it on.

Deduplication makes the broker remember, per topic and producer name, the highest sequence id it
stored, and drop a message whose sequence id is not higher. The ``pulsar`` sink's exactly-once
guarantee rests on it. Which setting decides, most specific first:

1. the topic's own policy (``pulsar-admin topics set-deduplication``),
2. the namespace's policy (``pulsar-admin namespaces set-deduplication``, :func:`enable_deduplication`),
3. the brokers' ``brokerDeduplicationEnabled`` (default false).

For an existing topic the broker resolves the three itself (``deduplicationEnabled?applied=true``);
for a topic that does not exist yet (created by the first write) the namespace and the broker are
asked in turn.
"""

from __future__ import annotations

from dataclasses import dataclass

from widehouse.pulsar.admin import PulsarAdmin
from widehouse.pulsar.topics import TopicName

EXACTLY_ONCE = "exactly-once"
AT_LEAST_ONCE = "at-least-once"


@dataclass(frozen=True)
class Deduplication:
    """Whether the broker deduplicates ``topic``, and which setting said so."""

    topic: str
    enabled: bool
    decided_by: str

    @property
    def guarantee(self) -> str:
        return EXACTLY_ONCE if self.enabled else AT_LEAST_ONCE

    def advice(self) -> str:
        """What the user must do to get exactly-once (empty when deduplication is on)."""
        if self.enabled:
            return ""
        namespace = TopicName.parse(self.topic).full_namespace
        return (
            f"deduplication is off for {self.topic} ({self.decided_by}): writes are at-least-once; "
            f"enable it with `widehouse pulsar dedup --enable {namespace}` (or `pulsar-admin namespaces "
            f"set-deduplication {namespace} --enable`, or brokerDeduplicationEnabled=true on the brokers)"
        )


def deduplication(admin: PulsarAdmin, topic: TopicName | str) -> Deduplication:
    """The deduplication setting in force for ``topic`` (which need not exist yet)."""
    name = topic if isinstance(topic, TopicName) else TopicName.parse(topic)
    base = name.base
    applied = admin.deduplication_applied(base)
    if applied is not None:
        return Deduplication(str(base), applied, "topic policy as applied by the broker")
    namespace = admin.namespace_deduplication(base.full_namespace)
    if namespace is not None:
        return Deduplication(str(base), namespace, f"namespace {base.full_namespace} policy")
    broker = admin.broker_config().get("brokerDeduplicationEnabled", "false").strip().lower() == "true"
    return Deduplication(str(base), broker, "broker setting brokerDeduplicationEnabled")


def enable_deduplication(admin: PulsarAdmin, namespace: str, enabled: bool = True) -> None:
    """Set the namespace's deduplication policy (topics with their own policy keep it)."""
    admin.set_namespace_deduplication(namespace, enabled)

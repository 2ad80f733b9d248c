"""Find and remove the durable subscriptions of apps that no longer exist.

A Widehouse subscription (named ``<prefix><appId>``, see :mod:`.subscriptions`) is **alive** when a
consumer is attached (the app runs) or its ``widehouse.heartbeat`` property is younger than the
TTL (the app stopped recently and may restart: its unread data must stay). Otherwise the app is
gone (crashed for good, decommissioned, or it stopped reading that topic after a replan) and the
subscription only pins backlog: :func:`cleanup` deletes it. ``retire`` names apps to remove now,
whatever their state (an app being decommissioned).

Used by ``widehouse pulsar cleanup`` and ``widehouse pulsar lag``, and by the supervisor DAG.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from widehouse.contracts.identity import SUBSCRIPTION_PREFIX, app_of
from widehouse.errors import PulsarError
from widehouse.source.broker import BrokerView
from widehouse.source.subscriptions import PROP_HEARTBEAT, PROP_HOST


@dataclass(frozen=True)
class AppSubscription:
    """One Widehouse subscription on one topic-partition, as the broker reports it."""

    topic: str
    subscription: str
    app: str
    consumers: int
    backlog: int
    heartbeat_ms: int | None
    host: str = ""

    def idle_s(self, now_ms: int) -> float | None:
        """Seconds since the last heartbeat (None when the subscription has none)."""
        return None if self.heartbeat_ms is None else max(0.0, (now_ms - self.heartbeat_ms) / 1000)


@dataclass(frozen=True)
class Verdict:
    subscription: AppSubscription
    remove: bool
    reason: str


def all_namespaces(view: BrokerView) -> list[str]:
    admin = view.admin()
    return sorted(ns for tenant in admin.tenants() for ns in admin.namespaces(tenant))


def scan(
    view: BrokerView, namespaces: Sequence[str], prefix: str = SUBSCRIPTION_PREFIX
) -> list[AppSubscription]:
    """Every Widehouse subscription in ``namespaces`` (one stats call per topic-partition, parallel)."""
    topics: list[str] = []
    for names in view.map(lambda ns: view.admin().list_topics(ns), list(namespaces)):
        topics.extend(names)

    def subscriptions_of(topic: str) -> list[AppSubscription]:
        try:
            stats = view.admin().topic_stats(topic)
        except PulsarError:  # deleted meanwhile
            return []
        found = []
        for name, sub in (stats.get("subscriptions") or {}).items():
            app = app_of(name, prefix)
            if app is None:
                continue
            props = sub.get("subscriptionProperties") or {}
            beat = props.get(PROP_HEARTBEAT)
            found.append(
                AppSubscription(
                    topic=topic,
                    subscription=name,
                    app=app,
                    consumers=len(sub.get("consumers") or []),
                    backlog=int(sub.get("msgBacklog", 0)),
                    heartbeat_ms=int(beat) if beat and beat.isdigit() else None,
                    host=str(props.get(PROP_HOST, "")),
                )
            )
        return found

    result: list[AppSubscription] = []
    for found in view.map(subscriptions_of, topics):
        result.extend(found)
    return sorted(result, key=lambda s: (s.app, s.topic))


def judge(sub: AppSubscription, now_ms: int, ttl_s: float, retire: Iterable[str] = ()) -> Verdict:
    """Whether ``sub`` goes, and why (see the module docstring for the rule)."""
    if sub.app in set(retire):
        return Verdict(sub, True, "app retired")
    if sub.consumers > 0:
        return Verdict(sub, False, f"attached ({sub.consumers} consumer(s))")
    idle = sub.idle_s(now_ms)
    if idle is None:
        return Verdict(sub, True, "no heartbeat property")
    if idle > ttl_s:
        return Verdict(sub, True, f"no heartbeat for {_human(idle)} (ttl {_human(ttl_s)})")
    return Verdict(sub, False, f"heartbeat {_human(idle)} ago")


def cleanup(
    view: BrokerView,
    namespaces: Sequence[str],
    ttl_s: float,
    *,
    retire: Iterable[str] = (),
    prefix: str = SUBSCRIPTION_PREFIX,
    dry_run: bool = False,
    now_ms: int | None = None,
) -> list[Verdict]:
    """Judge every Widehouse subscription in ``namespaces`` and delete the dead ones."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    retired = set(retire)
    verdicts = [judge(s, now, ttl_s, retired) for s in scan(view, namespaces, prefix)]
    doomed = [v.subscription for v in verdicts if v.remove]
    if not dry_run and doomed:
        view.map(lambda s: view.admin().delete_subscription(s.topic, s.subscription, force=True), doomed)
    return verdicts


def _human(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"

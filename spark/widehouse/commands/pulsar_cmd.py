"""``widehouse pulsar cleanup|lag|dedup``: subscriptions the streaming apps keep, and deduplication.

- ``cleanup`` removes the subscriptions of apps that no longer exist: no consumer attached and no
  heartbeat for longer than ``--ttl`` (default 24h); ``--retire APP`` removes an app's now;
  ``--dry-run`` only shows the verdicts.
- ``lag`` shows, per app and topic, what the app has not committed yet (the subscription backlog),
  whether it is attached, and how old its heartbeat is.

Both scan ``--namespace`` (repeatable; default: every namespace of every tenant).

- ``dedup TOPIC_OR_NAMESPACE...`` says whether broker-side deduplication (what the ``pulsar`` sink's
  exactly-once rests on) is in force and which setting decides; ``--enable`` / ``--disable`` set
  the namespace policy first.
- ``token ROLE`` prints a token for ROLE signed with the local secured Pulsar's key
  (``WIDEHOUSE_PULSAR_AUTH=token``), ``--ttl`` to make it expire; ``--grant TENANT/NS`` (repeatable)
  also grants the role ``--actions`` there, with the superuser token of the settings.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from widehouse.commands.command import add_command
from widehouse.commands.table import render
from widehouse.contracts import values
from widehouse.contracts.identity import SUBSCRIPTION_PREFIX
from widehouse.errors import ConfigError
from widehouse.pulsar.topics import TopicName
from widehouse.settings import Settings
from widehouse.source.broker import BrokerView
from widehouse.source.cleanup import all_namespaces, cleanup, scan


@values.for_argparse
def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``30m``, ``24h``, ``7d`` (a bare number is seconds) in seconds."""
    return values.parse_duration_ms(text.strip(), bare_unit="s") / 1000


def register(subparsers: Any) -> None:
    parser = add_command(
        subparsers,
        "pulsar",
        None,
        help="durable subscriptions of the streaming apps: cleanup, lag",
        description="Inspect and clean the durable subscriptions the Pulsar source keeps per app.",
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    clean = add_command(
        actions,
        "cleanup",
        run_cleanup,
        help="remove subscriptions of apps that no longer exist",
        description="Remove Widehouse subscriptions with no consumer attached and no heartbeat for "
        "longer than --ttl, and those of --retire'd apps.",
    )
    _common(clean)
    clean.add_argument(
        "--ttl", type=parse_duration, default=parse_duration("24h"), help="heartbeat age (default 24h)"
    )
    clean.add_argument("--retire", action="append", default=[], metavar="APP", help="remove this app's")
    clean.add_argument("--dry-run", action="store_true", help="show the verdicts, remove nothing")
    lag = add_command(actions, "lag", run_lag, help="backlog of each app's subscriptions per topic")
    _common(lag)
    lag.add_argument("--app", action="append", default=[], help="only these apps")
    dedup = add_command(
        actions,
        "dedup",
        run_dedup,
        help="is deduplication (the sink's exactly-once) on for these topics / namespaces",
        description="Show, and optionally set, broker-side deduplication per namespace or topic.",
    )
    token = add_command(
        actions,
        "token",
        run_token,
        help="print a token for a role of the local secured Pulsar (WIDEHOUSE_PULSAR_AUTH=token)",
        description="Sign a JWT for ROLE with the local broker's secret key and print it; optionally "
        "grant the role permissions on namespaces.",
    )
    token.add_argument("role")
    token.add_argument("--ttl", type=parse_duration, default=None, help="expire after (default: never)")
    token.add_argument("--grant", action="append", default=[], metavar="TENANT/NS")
    token.add_argument("--actions", default="produce,consume", help="with --grant (default: produce,consume)")
    dedup.add_argument("targets", nargs="+", metavar="TOPIC|TENANT/NS")
    switch = dedup.add_mutually_exclusive_group()
    switch.add_argument("--enable", action="store_true", help="enable it on the namespaces first")
    switch.add_argument("--disable", action="store_true", help="disable it on the namespaces first")


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--namespace", action="append", default=[], metavar="TENANT/NS", help="default: all namespaces"
    )
    parser.add_argument(
        "--prefix", default=SUBSCRIPTION_PREFIX, help=f"subscription prefix ({SUBSCRIPTION_PREFIX})"
    )


def _namespaces(view: BrokerView, given: list[str]) -> list[str]:
    for namespace in given:
        if namespace.count("/") != 1:
            raise ConfigError(f"--namespace {namespace!r} must be tenant/namespace")
    return sorted(set(given)) if given else all_namespaces(view)


def run_cleanup(args: argparse.Namespace, settings: Settings) -> int:
    view = BrokerView(settings.pulsar)
    try:
        namespaces = _namespaces(view, args.namespace)
        verdicts = cleanup(
            view, namespaces, args.ttl, retire=args.retire, prefix=args.prefix, dry_run=args.dry_run
        )
    finally:
        view.close()
    rows = [
        (
            v.subscription.app,
            _short(v.subscription.topic),
            ("would remove" if args.dry_run else "removed") if v.remove else "kept",
            v.reason,
        )
        for v in verdicts
    ]
    print(render(("app", "topic", "action", "why"), rows) if rows else "no Widehouse subscriptions found")
    removed = sum(v.remove for v in verdicts)
    print(f"{removed} of {len(verdicts)} subscription(s) {'to remove' if args.dry_run else 'removed'}")
    return 0


def run_lag(args: argparse.Namespace, settings: Settings) -> int:
    view = BrokerView(settings.pulsar)
    try:
        subs = scan(view, _namespaces(view, args.namespace), args.prefix)
    finally:
        view.close()
    wanted = set(args.app)
    now = int(time.time() * 1000)
    per_topic: dict[tuple[str, str], list[Any]] = {}
    for sub in subs:
        if wanted and sub.app not in wanted:
            continue
        base = str(TopicName.parse(sub.topic).base)
        row = per_topic.setdefault((sub.app, base), [0, 0, 0, None])
        row[0] += 1
        row[1] += sub.backlog
        row[2] += sub.consumers
        idle = sub.idle_s(now)
        if idle is not None:
            row[3] = idle if row[3] is None else max(row[3], idle)
    rows = [
        (app, _short(topic), parts, backlog, "yes" if consumers else "no", _age(idle))
        for (app, topic), (parts, backlog, consumers, idle) in sorted(per_topic.items())
    ]
    header = ("app", "topic", "partitions", "backlog", "attached", "heartbeat age")
    print(render(header, rows) if rows else "no Widehouse subscriptions found")
    return 0


def _short(topic: str) -> str:
    return topic.removeprefix("persistent://")


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def run_token(args: argparse.Namespace, settings: Settings) -> int:
    from widehouse.pulsar.admin import PulsarAdmin
    from widehouse.pulsar.tokens import issue_token

    token = issue_token(settings.state_dir, args.role, ttl_seconds=args.ttl)
    actions = [a.strip() for a in args.actions.split(",") if a.strip()]
    if args.grant:
        with PulsarAdmin(settings.pulsar) as admin:
            for namespace in args.grant:
                admin.grant_permission(namespace, args.role, actions)
    print(token)  # the one output, for $(...): asked for explicitly
    return 0


def run_dedup(args: argparse.Namespace, settings: Settings) -> int:
    from widehouse.pulsar.admin import PulsarAdmin
    from widehouse.pulsar.dedup import deduplication, enable_deduplication

    topics: list[TopicName | str] = []
    for target in args.targets:
        if "://" in target:
            topics.append(TopicName.parse(target))
        elif target.count("/") == 1:
            topics.append(target)
        else:
            raise ConfigError(f"{target!r} is neither a full topic name nor tenant/namespace")
    rows = []
    with PulsarAdmin(settings.pulsar) as admin:
        for target in topics:
            namespace = target.full_namespace if isinstance(target, TopicName) else target
            if args.enable or args.disable:
                enable_deduplication(admin, namespace, enabled=args.enable)
            # a namespace is shown through a topic name that does not exist: namespace, then broker
            probe = (
                target
                if isinstance(target, TopicName)
                else TopicName.parse(f"persistent://{namespace}/__widehouse_dedup_probe")
            )
            status = deduplication(admin, probe)
            shown = _short(str(target)) if isinstance(target, TopicName) else namespace
            rows.append((shown, status.guarantee, status.decided_by))
    print(render(("topic / namespace", "sink guarantee", "decided by"), rows))
    return 0

"""A small client for the Pulsar admin REST API (v2).

Only what Widehouse needs: tenants and namespaces, partitioned topics (create, grow), topic lists,
stats, subscriptions, deduplication policies, registered schemas. Every failure is a
:class:`PulsarError` naming the request and Pulsar's answer; a broker that refuses the token (or
its absence) answers with a :class:`~widehouse.pulsar.auth.PulsarAuthError` naming the request, the
role and an expired token as such (never the token).
Create one per process (or per task on executors); it holds a ``requests.Session``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar, Unpack
from urllib.parse import quote, urlsplit

from widehouse.errors import PulsarError
from widehouse.pulsar import bulk
from widehouse.pulsar.auth import admin_error, check_token
from widehouse.pulsar.bulk import Answer, Request
from widehouse.pulsar.positions import EntryInfo, Position
from widehouse.pulsar.topics import TopicName
from widehouse.settings import PulsarSettings

if TYPE_CHECKING:
    import requests

INDEX_HEADER = "X-Pulsar-Broker-Entry-METADATA-index"


T = TypeVar("T")
R = TypeVar("R")


class Call(TypedDict, total=False):
    """The optional arguments of an admin call (:meth:`PulsarAdmin.response`)."""

    json: Any
    params: dict[str, Any] | None
    ok: tuple[int, ...]


class TopicNotFoundError(PulsarError):
    """The topic (or partition) does not exist (deleted, or never created)."""


class SubscriptionBusyError(PulsarError):
    """The broker could not fence the subscription for a cursor reset (412 "Subscription Busy"):
    another operation on it was in flight, e.g. the broker copying subscriptions onto the new
    partitions of a grown topic. Transient; :meth:`PulsarAdmin.reset_cursor` retries it first."""


class CursorResetRefusedError(PulsarError):
    """The broker refused a cursor reset with 412 for another reason than a busy subscription, e.g.
    "unable to persist readPosition for cursor reset" while a restarted standalone broker recovers
    its storage (on this box for up to ~2 minutes after a SIGKILL). Not retried here: the caller
    decides whether the reset may wait (the source's subscriptions retry at the next trigger)."""


BUSY_ATTEMPTS = 6  # reset attempts while the subscription is busy: ~6 s of backoff in all


def _settle_environment(session: requests.Session, base_url: str) -> None:
    """Read what ``requests`` takes from the environment for ``base_url`` (proxies and ``no_proxy``,
    a CA bundle, ``~/.netrc`` credentials) once, instead of on every request.

    With ``trust_env`` a session scans the whole environment twice and looks for ``~/.netrc`` per
    request: ~15 % of the client's CPU for a HEAD ``examinemessage``, and the source's
    planner is bound by that CPU when it asks 1,000s of partitions at once (one Python process, its
    admin threads sharing the interpreter). Every request of a ``PulsarAdmin`` goes to
    ``base_url``, so the settings are the same for all of them.
    """
    import requests.utils

    found = session.merge_environment_settings(base_url, {}, None, None, None)
    session.proxies.update(found["proxies"])
    session.verify = found["verify"]
    session.cert = found["cert"]
    if session.auth is None:
        session.auth = requests.utils.get_netrc_auth(base_url)
    session.trust_env = False


class PulsarAdmin:
    def __init__(self, settings: PulsarSettings, timeout: float = 30.0) -> None:
        import requests

        self.base_url = settings.admin_url.rstrip("/")
        self.display_url = settings.display_admin_url.rstrip("/")  # credentials masked, for messages
        self.timeout = timeout
        from requests.adapters import HTTPAdapter
        from urllib3.util.retry import Retry

        self._session = requests.Session()
        # The broker's web server closes idle keep-alive connections (Jetty, ~30 s); a pooled one it
        # closed fails with "Remote end closed connection" when reused. Reads are retried on a new
        # connection; writes never are (a retried POST/PUT/DELETE could apply twice).
        retry = Retry(
            total=3, connect=3, read=3, status=0, backoff_factor=0.2, allowed_methods={"GET", "HEAD"}
        )
        self._session.mount("http://", HTTPAdapter(max_retries=retry))
        self._session.mount("https://", HTTPAdapter(max_retries=retry))
        self._token = settings.auth_token  # only to explain a refusal (role, expiry); never shown
        if settings.auth_token:
            self._session.headers["Authorization"] = f"Bearer {settings.auth_token}"
        _settle_environment(self._session, self.base_url)

    def close(self) -> None:
        self._session.close()

    def __enter__(self) -> PulsarAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plumbing ----------------------------------------------------------------------------
    def request(self, method: str, path: str, **call: Unpack[Call]) -> Any:
        """The body of :meth:`response` (same arguments), decoded: JSON, else text, None when empty."""
        response = self.response(method, path, **call)
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            return response.text

    def response(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        ok: tuple[int, ...] = (200, 204),
    ) -> requests.Response:
        """The admin API's answer to ``method path`` itself (status, headers, body); :meth:`request`
        returns its body decoded. A status outside ``ok`` raises :class:`PulsarError`."""
        import requests

        url = f"{self.base_url}/admin/v2/{path}"
        shown = f"{self.display_url}/admin/v2/{path}"  # credentials masked
        check_token(f"Pulsar admin {method} {shown}", self._token)  # expired: fail before asking
        try:
            response = self._session.request(method, url, json=json, params=params, timeout=self.timeout)
        except requests.RequestException as exc:
            raise PulsarError(f"Pulsar admin {method} {shown} failed: {exc}") from exc
        refused = admin_error(f"Pulsar admin {method} {shown}", response, self._token)
        if refused is not None:
            raise refused
        if response.status_code not in ok:
            reason = _reason(response)[:500]
            raise PulsarError(f"Pulsar admin {method} {shown} answered {response.status_code}: {reason}")
        return response

    def pipelined(
        self, calls: Sequence[Request], connections: int = bulk.CONNECTIONS
    ) -> list[Answer | Exception] | None:
        """``calls`` sent at once over a few connections (:mod:`.bulk`), their answers in order; None
        when this client's requests cannot go that way (TLS, a proxy, netrc credentials): send them
        one by one. Answers are not checked: a caller takes those it expects and sends the rest
        again through :meth:`response`, which explains a refusal."""
        session = self._session
        if (
            urlsplit(self.base_url).scheme != "http"
            or session.proxies.get("http")
            or session.proxies.get("all")
            or session.auth is not None
        ):
            return None
        sent = ("authorization", "user-agent")
        headers = {
            k: v if isinstance(v, str) else v.decode("latin-1")
            for k, v in session.headers.items()
            if k.lower() in sent
        }
        return bulk.send_all(self.base_url, headers, calls, self.timeout, connections)

    # -- clusters, tenants, namespaces -------------------------------------------------------
    def clusters(self) -> list[str]:
        return list(self.request("GET", "clusters"))

    def tenants(self) -> list[str]:
        return list(self.request("GET", "tenants"))

    def ensure_tenant(self, tenant: str) -> None:
        if tenant in self.tenants():
            return
        body = {"adminRoles": [], "allowedClusters": self.clusters()}
        self.request("PUT", f"tenants/{quote(tenant)}", json=body, ok=(200, 204, 409))

    def namespaces(self, tenant: str) -> list[str]:
        return list(self.request("GET", f"namespaces/{quote(tenant)}"))

    def delete_tenant(self, tenant: str) -> None:
        """Delete an empty tenant (its namespaces first: :meth:`delete_namespace`)."""
        self.request("DELETE", f"tenants/{quote(tenant)}", ok=(200, 204, 404))

    def delete_namespace(self, namespace: str) -> None:
        """Delete a namespace without topics (delete them first: :meth:`delete_topic`)."""
        self.request("DELETE", f"namespaces/{namespace}", ok=(200, 204, 404))

    def grant_permission(self, namespace: str, role: str, actions: Sequence[str]) -> None:
        """Grant ``role`` the ``actions`` (``produce``, ``consume``, ...) on ``namespace`` (a broker
        with authorization on; needs a superuser's or the tenant admin's token)."""
        if not role or "/" in role:
            raise PulsarError(f"role {role!r} must be a non-empty name without '/'")
        path = f"namespaces/{namespace}/permissions/{quote(role, safe='')}"
        self.request("POST", path, json=list(actions), ok=(200, 204))

    def permissions(self, namespace: str) -> dict[str, list[str]]:
        """Each role's granted actions on ``namespace``."""
        return dict(self.request("GET", f"namespaces/{namespace}/permissions") or {})

    def set_auto_topic_creation(self, namespace: str, allowed: bool) -> None:
        """Allow or forbid creating topics of ``namespace`` by using them (the broker's default)."""
        body = {"allowAutoTopicCreation": allowed, "topicType": "non-partitioned"}
        self.request("POST", f"namespaces/{namespace}/autoTopicCreation", json=body, ok=(200, 204))

    def ensure_namespace(self, namespace: str) -> None:
        """Create ``tenant/namespace`` (and its tenant) if missing."""
        tenant, _, _name = namespace.partition("/")
        if not _name:
            raise PulsarError(f"namespace {namespace!r} must be tenant/namespace")
        self.ensure_tenant(tenant)
        if namespace in self.namespaces(tenant):
            return
        self.request("PUT", f"namespaces/{namespace}", ok=(200, 204, 409))

    # -- topics ------------------------------------------------------------------------------
    def partition_count(self, topic: TopicName | str) -> int:
        """Partitions of a partitioned topic; 0 for a non-partitioned or missing topic."""
        name = _topic(topic)
        # Pulsar 4 answers 404 for a topic that does not exist (older brokers said partitions=0)
        meta = self.request("GET", f"{name.rest_path}/partitions", ok=(200, 404))
        return int(meta.get("partitions", 0)) if isinstance(meta, dict) else 0

    def create_partitioned_topic(self, topic: TopicName | str, partitions: int) -> None:
        if partitions < 1:
            raise PulsarError(f"partitions for {topic} must be >= 1, got {partitions}")
        name = _topic(topic)
        self.request("PUT", f"{name.rest_path}/partitions", json=partitions, ok=(200, 204))

    def ensure_partitions(self, topic: TopicName | str, partitions: int) -> int:
        """Create the partitioned topic, or grow it to ``partitions``; never shrinks. Returns the count."""
        name = _topic(topic)
        current = self.partition_count(name)
        if current == 0:
            self.ensure_namespace(name.full_namespace)
            self.create_partitioned_topic(name, partitions)
            return partitions
        if partitions > current:
            self.request("POST", f"{name.rest_path}/partitions", json=partitions, ok=(200, 204))
            return partitions
        return current

    def list_topics(self, namespace: str) -> list[str]:
        """Every persistent topic of a namespace, partitions listed individually."""
        call = list_topics_request(namespace)
        return sorted(self.request(call.method, call.path))

    def list_partitioned_topics(self, namespace: str) -> list[str]:
        return sorted(self.request("GET", f"persistent/{namespace}/partitioned"))

    def delete_topic(self, topic: TopicName | str, force: bool = True) -> None:
        name = _topic(topic)
        path = f"{name.rest_path}/partitions" if self.partition_count(name) > 0 else name.rest_path
        self.request("DELETE", path, params={"force": str(force).lower()}, ok=(200, 204, 404))

    def stats(self, topic: TopicName | str) -> dict[str, Any]:
        """Topic stats; for a partitioned topic the aggregate with ``perPartition`` details."""
        name = _topic(topic)
        if self.partition_count(name) > 0:
            result = self.request(
                "GET", f"{name.rest_path}/partitioned-stats", params={"perPartition": "true"}
            )
        else:
            result = self.request("GET", f"{name.rest_path}/stats")
        return dict(result)

    def topic_stats(self, topic: TopicName | str) -> dict[str, Any]:
        """Stats of one non-partitioned topic or one partition (no partition lookup first)."""
        return dict(self.request("GET", f"{_topic(topic).rest_path}/stats"))

    def internal_stats(self, topic: TopicName | str) -> dict[str, Any]:
        """Managed-ledger internals of one partition: ledgers, entries, cursors."""
        call = internal_stats_request(topic)
        return dict(self.request(call.method, call.path))

    # -- entries (positions and broker indexes) ----------------------------------------------
    def examine(self, topic: TopicName | str, which: str = "latest") -> EntryInfo | None:
        """The first (``earliest``) or last (``latest``) entry of a partition; None when it is empty.

        A missing topic raises :class:`TopicNotFoundError`.
        """
        call = examine_request(topic, which)
        response = self.response(call.method, call.path, params=dict(call.params or {}), ok=(200, 404, 412))
        if response.status_code == 404:
            raise TopicNotFoundError(f"topic {topic} not found: {_reason(response)[:200]}")
        if response.status_code == 412:  # "the total message is zero"
            return None
        return entry_from_headers(topic, response.headers)

    def entry_info(self, topic: TopicName | str, ledger: int, entry: int) -> EntryInfo:
        """Position, broker index and message count of one entry (it must exist)."""
        call = entry_request(topic, ledger, entry)
        return entry_from_headers(topic, self.response(call.method, call.path).headers)

    def message_id_at(self, topic: TopicName | str, publish_ms: int) -> Position:
        """Position of the first entry published at or after ``publish_ms`` (epoch ms); past the
        last entry when there is none. (Pulsar's ``messageid/{timestamp}``: a binary search over
        the partition's ledgers by publish time, which is per entry.)"""
        path = f"{_topic(topic).rest_path}/messageid/{int(publish_ms)}"
        response = self.response("GET", path, ok=(200, 404))
        if response.status_code == 404:
            raise TopicNotFoundError(f"topic {topic} not found: {response.text.strip()[:200]}")
        try:
            body = response.json()
            return Position(int(body["ledgerId"]), int(body["entryId"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise PulsarError(
                f"unexpected message id for {topic} at {publish_ms}: {response.text[:200]}"
            ) from exc

    # -- subscriptions -----------------------------------------------------------------------
    def create_subscription(
        self,
        topic: TopicName | str,
        subscription: str,
        start: Position | None,
        properties: dict[str, str] | None = None,
    ) -> bool:
        """Create a durable subscription whose first unread message is ``start`` (None: earliest).

        Returns False (and changes nothing) when it already exists; a missing topic raises
        :class:`TopicNotFoundError`.
        """
        call = create_subscription_request(topic, subscription, start, properties)
        response = self.response(call.method, call.path, json=call.json, ok=(200, 204, 404, 409))
        if response.status_code == 404:
            raise TopicNotFoundError(f"topic {topic} not found: {response.text.strip()[:200]}")
        return response.status_code != 409

    def reset_cursor(
        self, topic: TopicName | str, subscription: str, position: Position, excluded: bool = True
    ) -> None:
        """Move a subscription: consumed through ``position`` (``excluded``) or up to just before it."""
        call = reset_cursor_request(topic, subscription, position, excluded)
        self._reset(call.method, call.path, call.json)

    def reset_cursor_to_time(self, topic: TopicName | str, subscription: str, timestamp_ms: int) -> None:
        """Move a subscription to the first message published at or after ``timestamp_ms`` (0: the
        earliest retained)."""
        call = reset_cursor_to_time_request(topic, subscription, timestamp_ms)
        self._reset(call.method, call.path, call.json)

    def _reset(self, method: str, path: str, body: Any) -> None:
        """A cursor reset, retried while the broker answers 412 "Subscription Busy". A reset names
        its target position, so applying it again is harmless (unlike most writes)."""
        shown = f"{self.display_url}/admin/v2/{path}"
        for attempt in range(BUSY_ATTEMPTS):
            response = self.response(method, path, json=body, ok=(200, 204, 412))
            if response.status_code != 412:
                return
            reason = response.text.strip()[:300]
            if "busy" not in reason.lower() and "fence" not in reason.lower():
                raise CursorResetRefusedError(f"Pulsar admin {method} {shown} answered 412: {reason}")
            if attempt + 1 < BUSY_ATTEMPTS:
                time.sleep(min(2.0, 0.1 * 2**attempt))
        raise SubscriptionBusyError(
            f"Pulsar admin {method} {shown}: the subscription stayed busy "
            f"after {BUSY_ATTEMPTS} attempts: {reason}"
        )

    def subscription_properties(self, topic: TopicName | str, subscription: str) -> dict[str, str]:
        path = f"{_topic(topic).rest_path}/subscription/{quote(subscription, safe='')}/properties"
        return dict(self.request("GET", path) or {})

    def update_subscription_properties(
        self, topic: TopicName | str, subscription: str, properties: dict[str, str]
    ) -> None:
        """Replace the subscription's properties."""
        call = subscription_properties_request(topic, subscription, properties)
        self.request(call.method, call.path, json=call.json)

    def subscriptions(self, topic: TopicName | str) -> list[str]:
        return list(self.request("GET", f"{_topic(topic).rest_path}/subscriptions"))

    def delete_subscription(self, topic: TopicName | str, subscription: str, force: bool = True) -> None:
        path = f"{_topic(topic).rest_path}/subscription/{quote(subscription, safe='')}"
        self.request("DELETE", path, params={"force": str(force).lower()}, ok=(200, 204, 404))

    # -- deduplication and the schema registry ---------------------------------------------
    def deduplication_applied(self, topic: TopicName | str) -> bool | None:
        """Whether deduplication is in force on an existing topic (topic, namespace and broker
        policies resolved by the broker); None when the topic does not exist yet."""
        name = _topic(topic).base
        response = self.response(
            "GET", f"{name.rest_path}/deduplicationEnabled", params={"applied": "true"}, ok=(200, 404)
        )
        if response.status_code == 404:
            return None
        return response.text.strip().lower() == "true"

    def namespace_deduplication(self, namespace: str) -> bool | None:
        """The namespace's deduplication policy; None when it does not set one (the broker decides)."""
        value = self.request("GET", f"namespaces/{namespace}/deduplication")
        return value if isinstance(value, bool) else None

    def set_namespace_deduplication(self, namespace: str, enabled: bool) -> None:
        self.request("POST", f"namespaces/{namespace}/deduplication", json=enabled)

    def broker_config(self) -> dict[str, str]:
        """The brokers' runtime configuration (every setting, as strings)."""
        return dict(self.request("GET", "brokers/configuration/runtime") or {})

    def schema(self, topic: TopicName | str) -> dict[str, Any] | None:
        """The latest schema registered for a topic (``type``, ``data``, ``version`` ...); None if none."""
        name = _topic(topic).base
        path = f"schemas/{name.tenant}/{name.namespace}/{quote(name.local, safe='')}/schema"
        response = self.response("GET", path, ok=(200, 404))
        if response.status_code == 404:
            return None
        return dict(response.json())


def map_with_admins(
    pulsar: PulsarSettings, call: Callable[[PulsarAdmin, T], R], items: Sequence[T], workers: int
) -> list[R]:
    """``call(admin, item)`` for every item, in order, on up to ``workers`` threads; each thread
    talks through its own :class:`PulsarAdmin` (a session is not shared across threads), and every
    one is closed at the end."""
    if not items:
        return []
    local = threading.local()
    admins: list[PulsarAdmin] = []
    guard = threading.Lock()

    def one(item: T) -> R:
        admin: PulsarAdmin | None = getattr(local, "admin", None)
        if admin is None:
            admin = local.admin = PulsarAdmin(pulsar)
            with guard:
                admins.append(admin)
        return call(admin, item)

    try:
        with ThreadPoolExecutor(max_workers=max(1, min(workers, len(items)))) as pool:
            return list(pool.map(one, items))
    finally:
        for admin in admins:
            admin.close()


def examine_request(topic: TopicName | str, which: str) -> Request:
    """:meth:`PulsarAdmin.examine`'s call (also sent pipelined by the source, :mod:`.bulk`)."""
    # HEAD: the answer is in the headers; a GET would also send the entry (gzipped: broker CPU)
    path = f"{_topic(topic).rest_path}/examinemessage"
    return Request("HEAD", path, {"initialPosition": which, "messagePosition": 1})


def list_topics_request(namespace: str) -> Request:
    """:meth:`PulsarAdmin.list_topics`'s call (also sent pipelined by the source, :mod:`.bulk`)."""
    return Request("GET", f"persistent/{namespace}")


def internal_stats_request(topic: TopicName | str) -> Request:
    """:meth:`PulsarAdmin.internal_stats`'s call (also sent pipelined by the source, :mod:`.bulk`)."""
    return Request("GET", f"{_topic(topic).rest_path}/internalStats")


def entry_request(topic: TopicName | str, ledger: int, entry: int) -> Request:
    """:meth:`PulsarAdmin.entry_info`'s call (also sent pipelined by the source, :mod:`.bulk`)."""
    return Request("HEAD", f"{_topic(topic).rest_path}/ledger/{ledger}/entry/{entry}")  # headers only


def create_subscription_request(
    topic: TopicName | str, subscription: str, start: Position | None, properties: dict[str, str] | None
) -> Request:
    """:meth:`PulsarAdmin.create_subscription`'s call (200 or 204 created, 409 exists, 404 no topic)."""
    body: dict[str, Any] = {"ledgerId": -1, "entryId": -1}
    if start is not None:
        body = {"ledgerId": start.ledger, "entryId": start.entry}
    if properties:
        body["properties"] = properties
    return Request("PUT", f"{_topic(topic).rest_path}/subscription/{quote(subscription, safe='')}", json=body)


def reset_cursor_request(
    topic: TopicName | str, subscription: str, position: Position, excluded: bool = True
) -> Request:
    """:meth:`PulsarAdmin.reset_cursor`'s call (204 moved, 412 busy or refused, 404 no topic or
    subscription)."""
    path = f"{_topic(topic).rest_path}/subscription/{quote(subscription, safe='')}/resetcursor"
    return Request(
        "POST", path, json={"ledgerId": position.ledger, "entryId": position.entry, "excluded": excluded}
    )


def reset_cursor_to_time_request(topic: TopicName | str, subscription: str, timestamp_ms: int) -> Request:
    """:meth:`PulsarAdmin.reset_cursor_to_time`'s call (answers as :func:`reset_cursor_request`)."""
    path = f"{_topic(topic).rest_path}/subscription/{quote(subscription, safe='')}"
    return Request("POST", f"{path}/resetcursor/{int(timestamp_ms)}")


def subscription_properties_request(
    topic: TopicName | str, subscription: str, properties: dict[str, str]
) -> Request:
    """:meth:`PulsarAdmin.update_subscription_properties`'s call (204 replaced)."""
    path = f"{_topic(topic).rest_path}/subscription/{quote(subscription, safe='')}/properties"
    return Request("PUT", path, json=properties)


def entry_from_headers(topic: TopicName | str, headers: Mapping[str, str]) -> EntryInfo:
    """An entry's position, broker index and message count from the headers the broker answers
    ``examinemessage`` and ``ledger/<l>/entry/<e>`` with (any case)."""
    message_id = headers.get("X-Pulsar-Message-ID", "")
    index = headers.get(INDEX_HEADER)
    if index is None:
        raise PulsarError(
            f"the broker sent no entry index for {topic} ({message_id}): enable "
            "brokerEntryMetadataInterceptors="
            "org.apache.pulsar.common.intercept.AppendIndexMetadataInterceptor and "
            "exposingBrokerEntryMetadataToClientEnabled=true on the brokers"
        )
    try:
        ledger, entry = (int(x) for x in message_id.split(":")[:2])
        messages = int(headers.get("X-Pulsar-num-batch-message", "1"))
        return EntryInfo(Position(ledger, entry), int(index), max(1, messages))
    except ValueError as exc:
        raise PulsarError(f"unexpected entry headers for {topic}: {dict(headers)}") from exc


def _reason(response: requests.Response) -> str:
    """The broker's reason for a refusal: the body, else (a HEAD's answer) the status line's."""
    return response.text.strip() or (response.reason or "").strip()


def _topic(topic: TopicName | str) -> TopicName:
    return topic if isinstance(topic, TopicName) else TopicName.parse(topic)

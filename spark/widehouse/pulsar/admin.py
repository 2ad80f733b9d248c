"""A small client for the Pulsar admin REST API (v2).

Only what Widehouse needs: tenants and namespaces, partitioned topics (create, grow), topic lists,
stats, subscriptions. Every failure is a :class:`PulsarError` naming the request and Pulsar's answer.
Create one per process (or per task on executors); it holds a ``requests.Session``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from widehouse.errors import PulsarError
from widehouse.pulsar.topics import TopicName
from widehouse.settings import PulsarSettings


class PulsarAdmin:
    def __init__(self, settings: PulsarSettings, timeout: float = 30.0) -> None:
        import requests

        self.base_url = settings.admin_url.rstrip("/")
        self.timeout = timeout
        self._session = requests.Session()
        if settings.auth_token:
            self._session.headers["Authorization"] = f"Bearer {settings.auth_token}"

    def close(self) -> None:
        self._session.close()

    def __enter__(self) -> PulsarAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plumbing ----------------------------------------------------------------------------
    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        ok: tuple[int, ...] = (200, 204),
    ) -> Any:
        import requests

        url = f"{self.base_url}/admin/v2/{path}"
        try:
            response = self._session.request(method, url, json=json, params=params, timeout=self.timeout)
        except requests.RequestException as exc:
            raise PulsarError(f"Pulsar admin {method} {url} failed: {exc}") from exc
        if response.status_code not in ok:
            reason = response.text.strip()[:500]
            raise PulsarError(f"Pulsar admin {method} {url} answered {response.status_code}: {reason}")
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            return response.text

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
        return sorted(self.request("GET", f"persistent/{namespace}"))

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

    def subscriptions(self, topic: TopicName | str) -> list[str]:
        return list(self.request("GET", f"{_topic(topic).rest_path}/subscriptions"))

    def delete_subscription(self, topic: TopicName | str, subscription: str, force: bool = True) -> None:
        path = f"{_topic(topic).rest_path}/subscription/{quote(subscription, safe='')}"
        self.request("DELETE", path, params={"force": str(force).lower()}, ok=(200, 204, 404))


def _topic(topic: TopicName | str) -> TopicName:
    return topic if isinstance(topic, TopicName) else TopicName.parse(topic)

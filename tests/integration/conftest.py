"""Fixtures shared by the integration tests: a fresh Pulsar namespace and a Pulsar client."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.pulsar_support import drop_namespace
from widehouse.pulsar import PulsarAdmin
from widehouse.pulsar import client as pulsar_client
from widehouse.settings import Settings


@pytest.fixture
def ns(services: Settings) -> Iterator[str]:
    """A new namespace under the ``widehouse-it`` tenant, dropped (best effort) afterwards."""
    namespace = f"widehouse-it/t-{uuid.uuid4().hex[:8]}"
    with PulsarAdmin(services.pulsar) as admin:
        admin.ensure_namespace(namespace)
        yield namespace
        drop_namespace(admin, namespace)


@pytest.fixture(scope="module")
def client(services: Settings) -> Iterator[Any]:
    """A Pulsar client for the module."""
    c = pulsar_client.connect(services.pulsar)
    yield c
    c.close()

"""Pulsar client factory (pulsar-client, the C++-backed Python client)."""

from __future__ import annotations

import logging
from typing import Any

from widehouse.errors import PulsarError
from widehouse.settings import PulsarSettings, mask_url

_log = logging.getLogger("widehouse.pulsar.client")
# the C++ client logs every connection at INFO; keep it to warnings unless asked
_log.setLevel(logging.WARNING)


def connect(settings: PulsarSettings, **kwargs: Any) -> Any:
    """A ``pulsar.Client`` for the configured service URL, with token auth when set.

    Create it where it is used (driver, or inside ``read``/``write`` on executors); it is not picklable.
    """
    import pulsar

    options: dict[str, Any] = {
        "operation_timeout_seconds": 30,
        "logger": _log,
    }
    if settings.auth_token:
        options["authentication"] = pulsar.AuthenticationToken(settings.auth_token)
    options.update(kwargs)
    try:
        return pulsar.Client(settings.service_url, **options)
    except Exception as exc:  # the C++ client raises its own exception types
        raise PulsarError(
            f"cannot create a Pulsar client for {mask_url(settings.service_url)}: {exc}"
        ) from exc

"""Pulsar client factory (pulsar-client, the C++-backed Python client)."""

from __future__ import annotations

import logging
from typing import Any

from widehouse.errors import PulsarError
from widehouse.pulsar.auth import check_token, client_error, probe_credentials
from widehouse.settings import PulsarSettings, mask_url

_log = logging.getLogger("widehouse.pulsar.client")

# The C++ client's own console logger at WARN, never a Python ``logging.Logger``: with a Python
# logger the process aborts at exit about one run in four ("terminate called without an active
# exception", SIGABRT, even after ``close()``; apache/pulsar-client-python#256; measured here:
# 7 aborts in 30 runs vs 0 in 30). The C++ client logs every connection at INFO otherwise.
_LEVELS = {
    logging.DEBUG: "Debug",
    logging.INFO: "Info",
    logging.WARNING: "Warn",
    logging.ERROR: "Error",
}


def native_logger() -> Any:
    """A C++ console logger at the level of the ``widehouse.pulsar.client`` logger (WARN unless set)."""
    import pulsar

    level = _log.level or logging.WARNING
    name = next((n for lvl, n in sorted(_LEVELS.items()) if level <= lvl), "Error")
    return pulsar.ConsoleLogger(getattr(pulsar.LoggerLevel, name))


def connect(settings: PulsarSettings, **kwargs: Any) -> Any:
    """A ``pulsar.Client`` for the configured service URL, with token auth when set.

    Create it where it is used (driver, or inside ``read``/``write`` on executors); it is not picklable.

    Credentials are checked first, so a refusal is said at once: an expired token locally
    (:class:`~widehouse.pulsar.auth.PulsarTokenExpiredError`), a missing or rejected one by one
    admin REST request when the settings carry a usable admin URL (the C++ client would retry the
    refused handshake until its 30 s operation timeout and then say only "TimeOut").
    """
    import pulsar

    subject = f"Pulsar client for {mask_url(settings.service_url)}"
    check_token(subject, settings.auth_token)
    refused = probe_credentials(subject, settings)
    if refused is not None:
        raise refused
    options: dict[str, Any] = {
        "operation_timeout_seconds": 30,
        "logger": native_logger(),
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


def explain(subject: str, exc: BaseException, settings: PulsarSettings) -> PulsarError:
    """A client call's failure as a :class:`PulsarError` naming ``subject`` (the topic and what was
    done): an authentication, authorization or expired-token error when that is the cause (see
    :mod:`widehouse.pulsar.auth`), else the client's own message. Raise it ``from exc``."""
    refused = client_error(subject, exc, settings)
    if refused is not None:
        return refused
    return PulsarError(f"{subject}: {exc}")

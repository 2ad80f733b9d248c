"""Authentication and authorization failures against a broker that enforces them, named clearly.

A secured broker refuses in three ways, and each is reported at once with the topic or namespace
asked for and the role used - never the token:

- :class:`PulsarAuthenticationError`: no token, or one the broker does not accept (another key, a
  malformed JWT). Admin REST: 401 with Jetty's "Authentication required" page. Binary protocol: the
  C++ client retries the handshake until its operation timeout and then says only "TimeOut".
- :class:`PulsarTokenExpiredError` (an authentication error): the token's ``exp`` has passed. The
  client knows its own token's claims (:func:`widehouse.pulsar.tokens.describe_token`), so this is
  checked locally before connecting and whenever a client call fails, and never retried: a new
  token needs a restart with the new value.
- :class:`PulsarAuthorizationError`: the role is known but lacks the permission on the tenant,
  namespace or topic. Admin REST: 401 (Pulsar 4.0) or 403 with a JSON ``reason``; binary protocol:
  ``AuthorizationError`` at once.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import TYPE_CHECKING, Any

from widehouse.errors import PulsarError
from widehouse.pulsar import tokens

if TYPE_CHECKING:
    import requests

    from widehouse.settings import PulsarSettings


class PulsarAuthError(PulsarError):
    """The broker refused the client's credentials or the role's permissions."""


class PulsarAuthenticationError(PulsarAuthError):
    """No token, or a token the broker does not accept."""


class PulsarTokenExpiredError(PulsarAuthenticationError):
    """The token's ``exp`` claim has passed: issue a new token (not retried)."""


class PulsarAuthorizationError(PulsarAuthError):
    """The token's role has no permission for the tenant, namespace or topic."""


REFUSALS = ("PulsarTokenExpiredError", "PulsarAuthenticationError", "PulsarAuthorizationError")


def is_refusal(error: object) -> bool:
    """Whether ``error`` (an exception, or the text Spark reports for a failed query, which carries the
    Python exception's class name) is a refusal of the credentials: retrying it cannot succeed."""
    if isinstance(error, PulsarAuthError):
        return True
    text = str(error)
    return any(name in text for name in REFUSALS)


FIX = "set WIDEHOUSE_PULSAR_AUTH_TOKEN (Airflow: the widehouse_pulsar Connection's password)"


def expired_error(
    subject: str, token: str | None, now: float | None = None
) -> PulsarTokenExpiredError | None:
    """The error for a token whose ``exp`` has passed (checked locally), else None."""
    info = tokens.describe_token(token)
    if info is None or not info.expired(now):
        return None
    return PulsarTokenExpiredError(
        f"{subject}: the Pulsar token of {info.describe(now)}; issue a new token and {FIX}"
    )


def check_token(subject: str, token: str | None) -> None:
    """Raise :class:`PulsarTokenExpiredError` before any connection when the token has expired."""
    error = expired_error(subject, token)
    if error is not None:
        raise error


def admin_error(subject: str, response: requests.Response, token: str | None) -> PulsarError | None:
    """The auth error an admin REST answer (401/403) means, else None. ``subject`` names the request."""
    if response.status_code not in (401, 403):
        return None
    expired = expired_error(subject, token)
    if expired is not None:
        return expired
    reason = _json_reason(response)
    if reason is not None or response.status_code == 403:
        # the broker authenticated the role and then refused the operation (its reason names the role
        # and the resource, never the token)
        shown = f": {reason}" if reason else ""
        return PulsarAuthorizationError(
            f"{subject}: {tokens.who(token)} is not authorized (answered {response.status_code}{shown}); "
            "grant the role permission on the tenant or namespace, or use another role's token"
        )
    return unauthenticated(subject, token, f"answered {response.status_code}: authentication required")


def unauthenticated(subject: str, token: str | None, answer: str) -> PulsarAuthenticationError:
    if not token:
        return PulsarAuthenticationError(
            f"{subject}: the broker requires authentication and no Pulsar token is set ({answer}); {FIX}"
        )
    return PulsarAuthenticationError(
        f"{subject}: the broker refused {tokens.who(token)} ({answer}); {FIX} to a token it accepts"
    )


def client_error(subject: str, failure: object, settings: PulsarSettings) -> PulsarError | None:
    """The auth error a ``pulsar`` client failure means, else None.

    ``failure`` is the exception a call raised or the ``_pulsar.Result`` an asynchronous call gave.
    ``AuthorizationError`` and ``AuthenticationError`` are definite. A ``Timeout`` is what the C++
    client reports after it kept failing the handshake (no token, a rejected or expired token), so it
    is explained by the token's own expiry, else by asking the admin REST API (when the settings
    carry a usable admin URL) whether these credentials are accepted at all.
    """
    if isinstance(failure, PulsarAuthError):  # refused by connect(): keep the kind, add the subject
        return type(failure)(f"{subject}: {failure}")
    expired = expired_error(subject, settings.auth_token)
    if expired is not None:
        return expired
    kind = type(failure).__name__ if isinstance(failure, BaseException) else getattr(failure, "name", "")
    if kind == "AuthorizationError":
        return PulsarAuthorizationError(
            f"{subject}: {tokens.who(settings.auth_token)} is not authorized for this topic; grant the "
            "role produce/consume permission on its namespace or use another role's token"
        )
    if kind in ("AuthenticationError", "ErrorGettingAuthenticationData"):
        return unauthenticated(subject, settings.auth_token, kind)
    if kind in ("Timeout", "TimeOut", "ConnectError"):
        return probe_credentials(subject, settings)
    return None


def probe_credentials(subject: str, settings: PulsarSettings) -> PulsarError | None:
    """Ask the admin REST API whether the broker accepts these credentials at all (one GET).

    Returns the authentication error when it does not, else None (the failure was something else).
    Executors that have no admin URL (``http://unused``) cannot ask: None.
    """
    if "unused" in settings.admin_url:
        return None
    import requests

    # asked once per PROBE_TTL_S per process and credentials (tasks connect often); a refusal is
    # never remembered, so a fixed token is seen at the next connect
    key = (settings.admin_url, hashlib.sha256((settings.auth_token or "").encode()).hexdigest())
    now = time.monotonic()
    if now - _ACCEPTED.get(key, -PROBE_TTL_S) < PROBE_TTL_S:
        return None
    # a short timeout: an admin API this process cannot reach must not slow every connect
    headers = {"Authorization": f"Bearer {settings.auth_token}"} if settings.auth_token else {}
    url = f"{settings.admin_url.rstrip('/')}/admin/v2/clusters"
    try:
        response = requests.get(url, headers=headers, timeout=3)
    except requests.RequestException:  # the admin API is down too: not an auth answer either way
        _ACCEPTED[key] = now
        return None
    if response.status_code == 401 and _json_reason(response) is None:
        return admin_error(subject, response, settings.auth_token)
    _ACCEPTED[key] = now
    return None


PROBE_TTL_S = 60.0
_ACCEPTED: dict[tuple[str, str], float] = {}
"""(admin URL, token digest) -> when the broker last did not refuse them (monotonic seconds)."""


def _json_reason(response: requests.Response) -> str | None:
    try:
        body: Any = json.loads(response.text)
    except ValueError:
        return None
    reason = body.get("reason") if isinstance(body, dict) else None
    return str(reason)[:300] if reason else None

"""Pulsar tokens: what a token claims (read without the key), and refusals that are never retried."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import pytest

from widehouse.errors import ConfigError
from widehouse.pulsar import tokens
from widehouse.pulsar.auth import PulsarTokenExpiredError, check_token, is_refusal
from widehouse.stream.restart import GiveUp, Restart, RestartBook, RestartPolicy

KEY = b"0123456789abcdef0123456789abcdef"


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def hand_made(claims: dict[str, object]) -> str:
    """An HS256 JWT built by hand (RFC 7519): the oracle for :func:`tokens.make_token`."""
    header = b64(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
    payload = b64(json.dumps(claims, separators=(",", ":")).encode())
    signature = hmac.new(KEY, f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{b64(signature)}"


def test_tokens_are_hs256_jwts_with_the_role_as_subject() -> None:
    assert tokens.make_token(KEY, "app-1", expires_at=2_000_000_000) == hand_made(
        {"sub": "app-1", "exp": 2_000_000_000}
    )
    with pytest.raises(ConfigError, match="needs a role"):
        tokens.make_token(KEY, "")


def test_a_token_is_described_by_role_and_expiry_never_shown() -> None:
    token = hand_made({"sub": "app-1", "exp": 1_000})
    info = tokens.describe_token(token)
    assert info == tokens.TokenInfo("app-1", 1_000.0)
    assert info.describe(now=2_000) == "role 'app-1', expired at 1970-01-01T00:16:40Z"
    assert info.describe(now=10) == "role 'app-1'"
    assert tokens.describe_token("not-a-jwt") is None and tokens.describe_token(None) is None
    assert token not in tokens.who(token)
    with pytest.raises(PulsarTokenExpiredError, match=r"^topic t: the Pulsar token of role 'app-1', expired"):
        check_token("topic t", token)
    check_token("topic t", hand_made({"sub": "app-1"}))  # no exp: never expires


def test_a_refused_stream_is_given_up_at_once_not_restarted() -> None:
    book = RestartBook(RestartPolicy(max_restarts=5, initial_s=1, cap_s=10))
    spark_text = "StreamingQueryException: widehouse.pulsar.auth.PulsarTokenExpiredError: t: expired"
    decision = book.failed("g1", spark_text, now=0)
    assert isinstance(decision, GiveUp) and "not restarted" in decision.message and book.pending == {}
    assert isinstance(book.failed("g2", "Connection refused", now=0), Restart)
    assert is_refusal(PulsarTokenExpiredError("x")) and not is_refusal(ValueError("PulsarError"))

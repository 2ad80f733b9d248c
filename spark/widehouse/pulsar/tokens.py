"""Pulsar token authentication: HS256 JWTs signed with a local secret key, and what a token says.

Pulsar's ``AuthenticationProviderToken`` verifies a JWT whose ``sub`` claim is the client's role
(and whose optional ``exp`` claim ends it), signed with the broker's ``tokenSecretKey``; a
``file:///`` secret key holds the raw key bytes (what ``pulsar tokens create-secret-key`` writes).
The local secured Pulsar (``WIDEHOUSE_PULSAR_AUTH=token``) keeps its key and its superuser token
under ``<state>/secrets`` (0600 files in a 0700 directory); :func:`issue_token` makes a token for
any other role. :func:`describe_token` reads a token's claims WITHOUT verifying it (the client has
no key), only to say which role was refused or that the token expired - it never returns the token.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from widehouse import private
from widehouse.errors import ConfigError

SECRET_KEY = private.PULSAR_SECRET_KEY
"""The broker's HS256 key (raw bytes) under ``<state>/secrets``."""
ADMIN_TOKEN = private.PULSAR_ADMIN_TOKEN
"""The superuser's token under ``<state>/secrets`` (also the broker's own client token)."""
ADMIN_ROLE = "widehouse-admin"
KEY_BYTES = 32  # HS256 wants a key of at least 256 bits (jjwt's Keys.hmacShaKeyFor refuses less)


@dataclass(frozen=True)
class TokenInfo:
    """What an (unverified) token claims: its role and when it expires (epoch seconds, or None)."""

    role: str | None
    expires_at: float | None

    def expired(self, now: float | None = None) -> bool:
        return self.expires_at is not None and self.expires_at <= (time.time() if now is None else now)

    def describe(self, now: float | None = None) -> str:
        """``role 'x'`` plus ``, expired at <UTC time>`` when it has: safe to print (no token)."""
        role = f"role {self.role!r}" if self.role else "a token without a role"
        if self.expires_at is not None and self.expired(now):
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.expires_at))
            return f"{role}, expired at {stamp}"
        return role


def make_token(key: bytes, role: str, *, expires_at: float | None = None) -> str:
    """An HS256 JWT ``{"sub": role[, "exp": expires_at]}`` signed with ``key``."""
    import jwt

    if not role:
        raise ConfigError("a Pulsar token needs a role (the JWT's sub claim), got an empty one")
    claims: dict[str, object] = {"sub": role}
    if expires_at is not None:
        claims["exp"] = int(expires_at)
    return jwt.encode(claims, key, algorithm="HS256")


def describe_token(token: str | None) -> TokenInfo | None:
    """The role and expiry a token claims (not verified), or None without a token or when unreadable."""
    if not token:
        return None
    import jwt

    try:
        claims = jwt.decode(token, options={"verify_signature": False, "verify_exp": False})
    except jwt.PyJWTError:  # not a JWT we can read (e.g. another provider's token): nothing to add
        return None
    exp = claims.get("exp")
    sub = claims.get("sub")
    return TokenInfo(
        role=sub if isinstance(sub, str) else None,
        expires_at=float(exp) if isinstance(exp, int | float) else None,
    )


def who(token: str | None) -> str:
    """How an error message names the credentials used: never the token itself."""
    info = describe_token(token)
    if not token:
        return "no token (WIDEHOUSE_PULSAR_AUTH_TOKEN is not set)"
    if info is None:
        return "a token that is not a readable JWT"
    return f"the token of {info.describe()}"


# -- the local broker's key and tokens ---------------------------------------------------------
def secret_key_path(state_dir: Path) -> Path:
    return private.secret_path(state_dir, SECRET_KEY)


def admin_token_path(state_dir: Path) -> Path:
    return private.secret_path(state_dir, ADMIN_TOKEN)


def ensure_secret_key(state_dir: Path) -> bytes:
    """The local broker's secret key, generated (random, 0600) on first use; race-safe like
    :func:`widehouse.private.ensure_secret`."""
    path = secret_key_path(state_dir)
    if not path.exists():
        _write_private(path, secrets.token_bytes(KEY_BYTES))
    key = path.read_bytes()
    if len(key) < KEY_BYTES:
        raise ConfigError(f"the Pulsar secret key {path} has {len(key)} bytes, needs {KEY_BYTES}; delete it")
    return key


def ensure_admin_token(state_dir: Path) -> str:
    """The superuser token (role ``widehouse-admin``, no expiry) of the local broker, made on first use."""
    path = admin_token_path(state_dir)
    if not path.exists():
        token = make_token(ensure_secret_key(state_dir), ADMIN_ROLE)
        _write_private(path, token.encode())
    return path.read_text(encoding="utf-8").strip()


def issue_token(state_dir: Path, role: str, *, ttl_seconds: float | None = None) -> str:
    """A token for ``role`` signed with the local broker's key (expiring after ``ttl_seconds``).

    The key must exist: the secured broker's first start (``WIDEHOUSE_PULSAR_AUTH=token widehouse
    services up pulsar``) makes it; a token signed with a new key would be refused anyway."""
    path = secret_key_path(state_dir)
    if not path.exists():
        raise ConfigError(
            f"no Pulsar secret key at {path}: start the local Pulsar with WIDEHOUSE_PULSAR_AUTH=token first"
        )
    key = ensure_secret_key(state_dir)
    expires_at = time.time() + ttl_seconds if ttl_seconds is not None else None
    return make_token(key, role, expires_at=expires_at)


def _write_private(final: Path, data: bytes) -> None:
    folder = private.private_dir(final.parent, tighten=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{final.name}.", dir=folder)  # 0600, O_EXCL
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        with contextlib.suppress(FileExistsError):  # another process made it first: its value wins
            os.link(temporary, final)
    finally:
        Path(temporary).unlink(missing_ok=True)

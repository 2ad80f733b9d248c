"""Masking of secrets: credentials in URLs and free text, credential-like keys, ``***``."""

from __future__ import annotations

import re
from urllib.parse import unquote

_USERINFO_RE = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^/?#@:\s]*):(?P<password>[^/?#\s]*)@")
_PARAM_RE = re.compile(r"(?P<head>(?:^|[&;])(?P<key>[^=&;#\s]*)=)(?P<value>[^&;#\s]*)")
_SECRET_KEY_PARTS = ("pass", "pwd", "token", "secret", "key", "credential", "signature", "auth")
MASK = "***"


def is_secret_key(key: str) -> bool:
    """True for a parameter or setting name that usually holds a credential (case-insensitive)."""
    lowered = unquote(key).lower()
    return any(part in lowered for part in _SECRET_KEY_PARTS)


def mask_url(url: str) -> str:
    """Mask the credentials of a URL (or of every URL in a text) with ``***``.

    Masks the password of ``user:password@`` and the value of query parameters whose name holds a
    credential (``password``, ``pass``, ``pwd``, ``token``, ``key``, ``secret``, ... in any case).
    Works on malformed URLs and on free text that contains URLs (error messages).
    """
    masked = _USERINFO_RE.sub(lambda m: f"{m['head']}:{MASK}@" if m["password"] else m[0], url)
    head, sep, query = masked.partition("?")
    if not sep:
        return masked
    query, hash_sep, fragment = query.partition("#")

    def param(m: re.Match[str]) -> str:
        return f"{m['head']}{MASK}" if is_secret_key(m["key"]) and m["value"] else m[0]

    return f"{head}?{_PARAM_RE.sub(param, query)}{hash_sep}{fragment}"


def mask_spark_conf(text: str) -> str:
    """WIDEHOUSE_SPARK_CONF with the values of credential-like keys masked."""
    return re.sub(
        r"(?P<key>[^;\n=]*)=(?P<value>[^;\n]*)",
        lambda m: f"{m['key']}={MASK}" if is_secret_key(m["key"]) else mask_url(m[0]),
        text,
    )

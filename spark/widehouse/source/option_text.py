"""What the ``pulsar`` source's and sink's option parsers share: option names and topic-keyed JSON.

Typed values (booleans, integers, durations) come from :mod:`widehouse.contracts.values`.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from widehouse.errors import ConfigError, PulsarError
from widehouse.pulsar.topics import TopicName


def canonical_option(key: str, canonical: Mapping[str, str], known: Iterable[str], owner: str) -> str:
    """The canonical spelling of option ``key`` (``canonical`` maps lowercase names to it). An unknown
    one is a :class:`ConfigError` for ``owner`` (``the pulsar source``) that suggests the closest
    known option and lists them all."""
    found = canonical.get(key.lower())
    if found is None:
        close = difflib.get_close_matches(key.lower(), list(canonical), n=1)
        hint = f"did you mean {canonical[close[0]]}? " if close else ""
        raise ConfigError(f"unknown option {key!r} for {owner}; {hint}known options: {', '.join(known)}")
    return found


def topic_entries(
    option: str, text: str, shape: str, shown: str | None = None
) -> list[tuple[str, TopicName, Any]]:
    """The entries ``(topic as written, its parsed name, value)`` of option ``option``'s JSON object
    keyed by topic. Errors name the option (as ``shown``, e.g. ``option='{…'``, for invalid JSON) and
    say the expected ``shape`` (``topic -> position``)."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"option {shown or option} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"option {option} must be a JSON object of {shape}")
    entries = []
    for topic, value in data.items():
        try:
            entries.append((topic, TopicName.parse(topic), value))
        except PulsarError as exc:
            raise ConfigError(f"option {option}: {exc}") from exc
    return entries

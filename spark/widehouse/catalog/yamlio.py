"""A strict YAML reader for the catalog.

PyYAML silently keeps the last of two equal keys and reads ``yes``/``no``/``on``/``off`` as booleans
(YAML 1.1). A catalog is edited by hand and everything in it reaches SQL, so this reader:

- rejects duplicate keys, naming the file, the key and both lines;
- rejects non-string keys (``1:`` or ``true:``);
- reads only ``true``/``false`` as booleans (YAML 1.2 core schema), so ``values: [yes, no]`` stays
  a list of strings;
- returns :class:`YMap` / :class:`YList` (a ``dict`` / ``list`` that remember their line and the line
  of each key), so later validation can point at the line of the culprit.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from widehouse.errors import CatalogError

_BASE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class YMap(dict[str, Any]):
    """A mapping read from YAML: ``line`` of the mapping and ``key_lines[key]`` (1-based)."""

    line: int = 0
    key_lines: dict[str, int]

    def line_of(self, key: str) -> int:
        return self.key_lines.get(key, self.line)


class YList(list[Any]):
    """A sequence read from YAML, with the 1-based ``line`` where it starts."""

    line: int = 0


class _StrictLoader(_BASE_LOADER):  # type: ignore[misc,valid-type]
    """SafeLoader with YAML 1.2 booleans, no duplicate keys, string keys only."""

    source: str = "<yaml>"


# YAML 1.2 core booleans only: drop the 1.1 resolver (yes/no/on/off) and add true/false back.
_StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in _BASE_LOADER.yaml_implicit_resolvers.items()
}
_StrictLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> YMap:
    loader.flatten_mapping(node)
    result = YMap()
    result.line = node.start_mark.line + 1
    result.key_lines = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        if not isinstance(key, str):
            raise CatalogError(f"{loader.source}:{line}: key {key!r} must be a string (quote it)")
        if key in result:
            first = result.key_lines[key]
            raise CatalogError(
                f"{loader.source}:{line}: duplicate key {key!r} (first defined on line {first})"
            )
        result[key] = loader.construct_object(value_node, deep=True)
        result.key_lines[key] = line
    return result


def _construct_sequence(loader: _StrictLoader, node: yaml.SequenceNode) -> YList:
    result = YList(loader.construct_object(child, deep=True) for child in node.value)
    result.line = node.start_mark.line + 1
    return result


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)


def load_yaml(path: Path, display: str | None = None) -> Any:
    """Parse one YAML document strictly; errors name ``display`` (default: the path) and the line."""
    source = display or str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CatalogError(f"{source}: cannot read: {exc}") from exc
    return loads_yaml(text, source)


def loads_yaml(text: str, source: str = "<yaml>") -> Any:
    """Parse YAML text strictly (see the module docstring)."""
    loader = _StrictLoader(text)
    loader.source = source
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f":{mark.line + 1}" if mark is not None else ""
        raise CatalogError(f"{source}{where}: invalid YAML: {exc.problem or exc}") from exc
    except yaml.YAMLError as exc:
        raise CatalogError(f"{source}: invalid YAML: {exc}") from exc
    finally:
        loader.dispose()

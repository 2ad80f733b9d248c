"""The traffic generator: realistic, labelled JSON events for the catalog's topics, and a manifest.

``generate(settings, GenerateOptions(...))`` publishes to Pulsar and returns the :class:`Manifest`
(counts per topic and label, the expected wide rows); ``TrafficGenerator`` makes the same traffic
without Pulsar (for tests and dry runs). See ``widehouse generate --help``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from widehouse.generator.badinput import BAD_CLASSES, LABEL_PROPERTY, LABELS, POLICY, REASONS
from widehouse.generator.manifest import Manifest, TopicCounts, diff_rows, normalize
from widehouse.generator.options import FIRST_UID, GenerateOptions, uid_of
from widehouse.lazy import lazy_attribute

if TYPE_CHECKING:
    from widehouse.generator.core import Chunk, TrafficGenerator
    from widehouse.generator.run import generate

_MAKERS = {
    "Chunk": "widehouse.generator.core",
    "TrafficGenerator": "widehouse.generator.core",
    "generate": "widehouse.generator.run",
}
"""Names imported when first asked for (PEP 562): the traffic's makers import numpy (~0.07-0.09 s),
and the CLI imports this package for ``widehouse generate``'s options in every command it runs (a
stream's, each Airflow task's job)."""


def __getattr__(name: str) -> Any:
    return lazy_attribute(globals(), _MAKERS, name)


__all__ = [
    "BAD_CLASSES",
    "FIRST_UID",
    "LABELS",
    "LABEL_PROPERTY",
    "POLICY",
    "REASONS",
    "Chunk",
    "GenerateOptions",
    "Manifest",
    "TopicCounts",
    "TrafficGenerator",
    "diff_rows",
    "generate",
    "normalize",
    "uid_of",
]

"""The traffic generator: realistic, labelled JSON events for the catalog's topics, and a manifest.

``generate(settings, GenerateOptions(...))`` publishes to Pulsar and returns the :class:`Manifest`
(counts per topic and label, the expected wide rows); ``TrafficGenerator`` makes the same traffic
without Pulsar (for tests and dry runs). See ``widehouse generate --help``.
"""

from __future__ import annotations

from widehouse.generator.badinput import BAD_CLASSES, LABEL_PROPERTY, LABELS, POLICY, REASONS
from widehouse.generator.core import Chunk, TrafficGenerator
from widehouse.generator.manifest import Manifest, TopicCounts, diff_rows, normalize
from widehouse.generator.options import FIRST_UID, GenerateOptions, uid_of
from widehouse.generator.run import generate

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

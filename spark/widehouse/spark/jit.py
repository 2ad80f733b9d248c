"""How the driver JVM compiles to machine code: the JIT profile (``WIDEHOUSE_SPARK_DRIVER_JIT``).

HotSpot compiles a hot method twice by default ("tiered"): quickly with C1, with profiling, then,
once it has run some thousands of times, again with the optimizing C2. In a stream app's first
seven seconds on this project's 2-core box, C2 was 43 % of the driver JVM's CPU and C1 15 %
(async-profiler; NOTES, issue 28 sixth round): C2 compiles code that runs only while the app
starts (the JVM, the session, the queries' planning), on the cores the start-up needs.

The profiles:

- ``c1``: C1 only (``-XX:TieredStopAtLevel=1``). The stream's start-up fell from 6.1-6.4 s to
  4.4-5.0 s, and its JVM used half the CPU in a cold drain. Over twenty drains of 20,000-message
  batches (~4 minutes), its JVM CPU per drain stayed equal to tiered's: a stream's JVM runs the
  micro-batches' control plane (planning, scheduling, logs), while the events are parsed and folded
  in Python and cross the JVM as compressed bytes.
- ``late-c2``: C2 only for methods ten times hotter than tiered asks (the ``Tier4*`` thresholds
  x10): start-up code rarely gets there; long-running hot code does, later. Start-up 5.1-5.4 s.
- ``tiered``: the JVM's own thresholds. The batch jobs, whose JVM does the data plane (Spark SQL
  over millions of rows), keep it.
- ``auto`` (the default): ``c1`` for the stream app, ``tiered`` for every other job.

:func:`with_jit` adds the options to ``spark.driver.extraJavaOptions`` unless they already choose how
to compile (a user's own ``-XX:TieredStopAtLevel``, ``Tier4...`` and the like win). Executors of a
cluster keep the cluster's options; on ``local[*]`` they run in the driver JVM.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from widehouse.jvm import JIT_OPTIONS
from widehouse.settings.parsers import DRIVER_JIT_PROFILES
from widehouse.spark.class_archive import with_driver_options

Workload = Literal["stream", "batch"]
"""What a session is for: the stream app's micro-batches, or any other job."""

AUTO: dict[Workload, str] = {"stream": "c1", "batch": "tiered"}
"""What ``auto`` means for each workload."""

assert set(JIT_OPTIONS) | {"auto"} == set(DRIVER_JIT_PROFILES), "a JIT profile without options"

_OWN_CHOICE = (
    "TieredStopAtLevel",
    "TieredCompilation",
    "Tier3",
    "Tier4",
    "CompileThreshold",
    "-Xint",
    "-Xcomp",
)
"""Fragments of JVM options by which a user's own Java options already choose how to compile."""


def jit_profile(setting: str, workload: Workload) -> str:
    """The profile a session of ``workload`` gets from the setting (``auto`` resolved)."""
    return AUTO[workload] if setting == "auto" else setting


def with_jit(conf: Mapping[str, str], profile: str) -> dict[str, str]:
    """``conf`` with the ``profile``'s JIT options appended to the driver's Java options, unless the
    conf already chooses its own compilation (the user's choice wins)."""
    return with_driver_options(conf, JIT_OPTIONS[profile], unless=_OWN_CHOICE)

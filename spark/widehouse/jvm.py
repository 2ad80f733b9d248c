"""How the JVMs Widehouse starts compile to machine code: the JIT profiles and their options.

HotSpot compiles a hot method twice by default ("tiered"): quickly with C1, with profiling, then,
once it has run some thousands of times, again with the optimizing C2. C2 pays off in a JVM that
runs the same hot code for long; in a JVM that has just started, or that runs a wide control plane
(many code paths, each warm for a while), most of its work compiles code that soon goes cold, on the
cores the work itself needs. Two JVMs take a profile from a setting (the metastore service always
runs ``c1``):

- the Spark driver (``WIDEHOUSE_SPARK_DRIVER_JIT``, :mod:`widehouse.spark.jit`);
- the local Pulsar standalone (``WIDEHOUSE_PULSAR_JIT``, :mod:`widehouse.services.pulsar`), ``c1``
  by default. The broker serves the admin REST calls, lookups, subscriptions and readers of tests,
  the demo and benchmarks, each exercising code of its own. On this project's 2-core box, after a
  quarter of an hour of benchmarks the tiered broker's C2 thread was still 40 % of its CPU; from a
  fresh start, a ``c1`` broker used 22.5 core-s over ``python -m bench drain --events 300000
  --max-messages 20000`` (three drains) against 50.6 tiered and 34.1 ``late-c2`` (NOTES, issue 28,
  fourteenth round). The production stack (``docker/``) runs Pulsar's own image and options.

The profiles:

- ``c1``: C1 only (``-XX:TieredStopAtLevel=1``).
- ``late-c2``: C2 only for methods ten times hotter than tiered asks (the ``Tier4*`` thresholds x10).
- ``tiered``: the JVM's own thresholds.
"""

from __future__ import annotations

JIT_OPTIONS: dict[str, str] = {
    "c1": "-XX:TieredStopAtLevel=1",
    "late-c2": (
        "-XX:Tier4InvocationThreshold=50000 -XX:Tier4MinInvocationThreshold=6000 "
        "-XX:Tier4CompileThreshold=150000 -XX:Tier4BackEdgeThreshold=400000"
    ),
    "tiered": "",
}
"""The JVM options of each profile (``tiered``: none)."""


def common_pool_option(cores: int | None = None) -> str:
    """The JVM option that gives the common fork-join pool at least two threads.

    The JDK sizes that pool at one thread fewer than the cores, and with a single thread,
    ``CompletableFuture``'s ``*Async`` calls given no executor each start a new thread instead. The
    Pulsar broker makes such calls on paths every reader and consumer takes (its topic policies, at
    each subscribe): on this project's 2-core box a fresh broker started ~1,000 threads while 1,000
    readers subscribed (JFR's ``jdk.ThreadStart``), none with two, and the broker's CPU per reader
    fell ~20 % (NOTES, issue 28, thirty-fifth round). On more cores this is the JVM's own default
    (cores - 1)."""
    import os

    threads = max(2, (cores or os.cpu_count() or 1) - 1)
    return f"-Djava.util.concurrent.ForkJoinPool.common.parallelism={threads}"

"""The stream transform's plan: what the reading tasks fold (:mod:`widehouse.stream.transform`).

:class:`TransformPlan` is the picklable description a task gets (the catalog, the tables, the fast
path's switch), shipped once per process (:func:`_shipped_plan`); :class:`Prepared` what every task
of a plan derives from the catalog alone. The rows a task yields (``wh_kind``: :data:`KIND_PARTIAL`
and the others) have the schema of :func:`widehouse.stream.output.output_schema`.

Spark's planner processes (``create_data_source``, ``plan_data_source_read``, each query's source
runner) unpickle a group's source, plan included, only to pass it on or to plan offsets. So this
module imports neither pyarrow (the output's schema lives in :mod:`widehouse.stream.output`) nor the
catalog or the fast path, and a shipped plan builds its catalog when it is first used (in the
reading tasks' workers: the warm-up does it there).
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from widehouse.contracts.periods import HOUR_MS
from widehouse.errors import CatalogError
from widehouse.stream.deadletter import PAYLOAD_LIMIT

if TYPE_CHECKING:
    from widehouse.catalog import Catalog
    from widehouse.catalog.semantics.fold import ColumnRule
    from widehouse.stream.fastpath import HandlerTemplate

KIND_PARTIAL = "partial"
KIND_QUARANTINE = "quarantine"
KIND_LATE = "late"
KIND_STATS = "stats"


@dataclass(frozen=True)
class TransformPlan:
    """Everything the transform needs, picklable (shipped to executors with the function)."""

    catalog: Catalog
    tables: tuple[str, ...]
    """Wide tables to produce partials for, in output order (``t0_``, ``t1_``, ...)."""
    payload_limit: int = PAYLOAD_LIMIT
    """Quarantined payloads are cut to this many bytes (their full size is kept beside them)."""
    fast_path: bool = True
    """Fold valid, on-time events through each topic's compiled handler (:mod:`.fastpath`); False
    sends every event through the reference parse and fold (same output, slower: for comparisons)."""
    _shipped: tuple[bytes, bytes] | None = field(default=None, init=False, repr=False, compare=False)
    """(digest, state) this plan arrived as (:func:`_shipped_plan`), shipped on unchanged."""

    def __post_init__(self) -> None:
        for name in self.tables:
            self.catalog.table(name)  # CatalogError naming the table if unknown

    if not TYPE_CHECKING:  # a ``__getattr__`` would let any misspelt attribute pass the type checks

        def __getattr__(self, name: str) -> Any:
            """A shipped plan's catalog, built on first use from the state it arrived as (see
            :func:`_shipped_plan`); only reached for attributes the instance lacks."""
            shipped = self.__dict__.get("_shipped") if name == "catalog" else None
            if shipped is None:
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
            catalog = pickle.loads(pickle.loads(shipped[1])[3])  # noqa: S301 (Spark's own task bytes)
            object.__setattr__(self, "catalog", catalog)  # frozen: set once, as it is made
            return catalog

    @classmethod
    def for_topics(
        cls, catalog: Catalog, topics: list[str], payload_limit: int = PAYLOAD_LIMIT
    ) -> TransformPlan:
        """The plan for a slot group: every wide table its topics feed."""
        unknown = [t for t in topics if not catalog.has_topic(t)]
        if unknown:
            raise CatalogError(f"topics not in the catalog: {', '.join(sorted(unknown)[:5])}")
        tables = tuple(
            t.name for t in catalog.wide_tables if any(t.name in catalog.topic(n).tables for n in topics)
        )
        return cls(catalog, tables, payload_limit)

    def prefix(self, table: str) -> str:
        return f"t{self.tables.index(table)}_"

    def __reduce__(self) -> tuple[Callable[[bytes, bytes], TransformPlan], tuple[bytes, bytes]]:
        """Pickled as its state's bytes and their digest: :func:`_shipped_plan` builds it once per
        process (see :data:`_SHIPPED`).

        A plan that arrived pickled is shipped on as the bytes it came as. Spark's planner processes
        unpickle a group's source and pickle it again for its tasks, and pickling an unpickled
        catalog need not give the same bytes (a ``Path`` is rebuilt from its parts, so which equal
        strings are one object changes): the tasks would find another digest than the warm-up's
        and build every handler template again (~0.2 s a worker with 1,000 topics, measured)."""
        if self._shipped is not None:
            return _shipped_plan, self._shipped
        # the catalog apart: a process that never reads it never builds it
        catalog = pickle.dumps(self.catalog, protocol=5)
        state = pickle.dumps((self.tables, self.payload_limit, self.fast_path, catalog), protocol=5)
        return _shipped_plan, (hashlib.sha256(state).digest(), state)


_SHIPPED: dict[bytes, TransformPlan] = {}
"""Plans unpickled in this process, by the digest of their pickled state. Spark ships a group's plan
with every reading task (twice: in its reader and in its source class), and a Python worker runs
many of them: building a 1,000-topic catalog's objects again took ~40 ms a task, the same bytes
every time. Keyed by content, so a changed plan is built anew; a task only reads its plan."""
_SHIPPED_MAX = 8


def _shipped_plan(digest: bytes, state: bytes) -> TransformPlan:
    plan = _SHIPPED.get(digest)
    if plan is None:
        tables, payload_limit, fast_path, _catalog = pickle.loads(state)  # noqa: S301 (Spark's own task bytes)
        plan = object.__new__(TransformPlan)  # checked where it was made; its catalog comes on first use
        for name, value in (
            ("tables", tables),
            ("payload_limit", payload_limit),
            ("fast_path", fast_path),
            ("_shipped", (digest, state)),
        ):
            object.__setattr__(plan, name, value)  # frozen: set once, as it is made
        if len(_SHIPPED) >= _SHIPPED_MAX:
            _SHIPPED.clear()
        _SHIPPED[digest] = plan
    return plan


class Prepared:
    """What every task of one plan derives from the catalog alone, derived once per process: each
    topic's column rules per table and its fast-path handler template. A task binds them to its own
    tables' state (:class:`_Accumulator`); with 1,000 topics this was ~50 µs a topic and task."""

    def __init__(self, plan: TransformPlan) -> None:
        self.plan = plan
        self.rules: dict[str, list[tuple[str, list[ColumnRule]]] | None] = {}
        self.templates: dict[str, HandlerTemplate | None] = {}

    def topic_rules(self, topic_name: str) -> list[tuple[str, list[ColumnRule]]] | None:
        """(table, rules) for each of the plan's tables the topic feeds; None if it is not in the catalog."""
        if topic_name not in self.rules:
            from widehouse.catalog.semantics.fold import compile_rules

            catalog = self.plan.catalog
            found = None
            if catalog.has_topic(topic_name):
                topic = catalog.topic(topic_name)
                found = [
                    (name, compile_rules(topic, catalog.table(name)))
                    for name in topic.tables
                    if name in self.plan.tables
                ]
            self.rules[topic_name] = found
        return self.rules[topic_name]

    def template(self, topic_name: str) -> HandlerTemplate | None:
        """The topic's handler template (None: no fast path); the topic must be in the catalog."""
        if topic_name not in self.templates:
            from widehouse.stream.fastpath import handler_template

            catalog = self.plan.catalog
            feeds = self.topic_rules(topic_name) or []
            self.templates[topic_name] = handler_template(
                catalog.topic(topic_name),
                [(catalog.table(name), HOUR_MS) for name, _rules in feeds],  # partials are hourly
                catalog.rules,
                catalog.max_payload_bytes,
            )
        return self.templates[topic_name]


_PREPARED: dict[int, Prepared] = {}
""":class:`Prepared` by plan (its ``id``; the entry holds the plan, so the id stays its own). A
shipped plan is one object per process (:func:`_shipped_plan`), so every task of a group finds it."""


def prepared(plan: TransformPlan) -> Prepared:
    found = _PREPARED.get(id(plan))
    if found is None or found.plan is not plan:
        if len(_PREPARED) >= _SHIPPED_MAX:
            _PREPARED.clear()
        found = _PREPARED[id(plan)] = Prepared(plan)
    return found

"""The streams supervisor: make the running streaming apps match the current plan, once per call.

One app per slot group. Per cycle (:meth:`Supervisor.cycle`):

1. A group whose topics changed in the plan, or that left it, is stopped at a batch boundary
   (SIGTERM, grace); a changed group starts again on its new topics in the same cycle. A group that
   left the plan is *retired*: its app's Pulsar subscriptions are cleaned up by
   ``widehouse pulsar cleanup`` (TTL-based, so a moved topic's position stays readable meanwhile).
2. A running group is **alive** when its process is up and it committed a batch within
   ``stale_seconds`` (a just started one gets ``startup_seconds`` for its first batch). A committed
   batch since its start resets its failure count.
3. A dead or stuck group is a *failure*: the first restart is immediate, the next ones wait
   ``backoff_seconds * 2**(n-2)`` (capped at ``backoff_max_seconds``); after ``max_failures``
   consecutive failures it is *given up*: not restarted again, and the cycle reports it with the
   tail of its log (the Airflow task fails) until an operator resets it (``widehouse supervise
   --reset GROUP``) or a new plan changes the group.

State (per group: topics, start time, failures, next start, given up, and when it was restarted
after a failure over the last :data:`RESTART_HISTORY_S`, for the Widehouse view's "restarts in the
last 24 h") lives in ``<state>/supervisor/state.json``; the clock, the launcher, the commit reader
and the job runner are injected, so the logic is tested with fakes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from widehouse.contracts.identity import group_app_id
from widehouse.errors import ClickHouseError, OrchestrationError
from widehouse.orchestration.launch import Launcher
from widehouse.orchestration.runner import Runner
from widehouse.planner import Plan
from widehouse.settings import Settings, SupervisorSettings

log = logging.getLogger(__name__)

CLEANUP_INTERVAL_S = 3600.0
"""How often retired apps' subscriptions are cleaned up while some are pending."""
RETIRED_KEEP_S = 2 * 86400.0
"""A retired app is forgotten after this (the cleanup TTL, 24 h, has removed its subscriptions)."""

RESTART_HISTORY_S = 14 * 86400.0
"""How long a group's restart times are kept (the Widehouse view's longest window, 14 days)."""
RESTART_HISTORY_MAX = 1000
"""At most this many restart times are kept per group (a group restarted in a tight loop)."""

Clock = Callable[[], float]
CommitReader = Callable[[], dict[str, float]]


@dataclass
class GroupState:
    topics: list[str]
    started_at: float | None = None
    """When the supervisor last started it (None: not running under the supervisor)."""
    failures: int = 0
    next_start_at: float = 0.0
    given_up: bool = False
    last_failure: str = ""
    restarted_at: list[float] = field(default_factory=list)
    """When the supervisor restarted it after a failure (epoch seconds, oldest first), over the last
    :data:`RESTART_HISTORY_S`. Unlike ``failures`` a committed batch or a reset does not clear it.
    Restarts of a failed query inside the app (:mod:`widehouse.stream.restart`) are not here."""

    def restarts_between(self, since: float, until: float) -> int:
        """Restarts with ``since < time <= until``."""
        return sum(1 for at in self.restarted_at if since < at <= until)


@dataclass
class SupervisorState:
    groups: dict[str, GroupState] = field(default_factory=dict)
    retired: dict[str, float] = field(default_factory=dict)
    """Retired app id (``<app>-<group>``) -> when it left the plan."""
    last_cleanup: float = 0.0

    @classmethod
    def load(cls, path: Path) -> SupervisorState:
        try:
            body = json.loads(path.read_text())
        except FileNotFoundError:
            return cls()
        except (OSError, ValueError) as exc:
            raise OrchestrationError(f"supervisor state {path} is unreadable: {exc}") from exc
        return cls(
            groups={name: GroupState(**raw) for name, raw in body.get("groups", {}).items()},
            retired={str(k): float(v) for k, v in body.get("retired", {}).items()},
            last_cleanup=float(body.get("last_cleanup", 0.0)),
        )

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True) + "\n")
        os.replace(tmp, path)


@dataclass(frozen=True)
class Action:
    group: str
    what: str
    """healthy, starting (no batch yet, within the startup grace), unknown (no progress readable),
    started, restarted, adopted, stopped, finishing (a plan change waits for a cut batch), retired,
    stuck, died, waiting, given-up, cleanup"""
    detail: str = ""


@dataclass(frozen=True)
class CycleReport:
    actions: tuple[Action, ...]
    given_up: dict[str, str]
    """Group -> why, with its log tail (non-empty fails the Airflow task)."""
    seconds: float

    def of(self, group: str) -> list[str]:
        return [a.what for a in self.actions if a.group == group]


def restart_delay(failures: int, knobs: SupervisorSettings) -> float:
    """Wait before restart number ``failures`` (1 = the first failure: at once)."""
    if failures <= 1:
        return 0.0
    return float(min(knobs.backoff_max_seconds, knobs.backoff_seconds * 2 ** (failures - 2)))


class Supervisor:
    def __init__(
        self,
        knobs: SupervisorSettings,
        app: str,
        state_path: Path,
        *,
        launcher: Launcher,
        commits: CommitReader,
        runner: Runner | None = None,
        cleanup_args: tuple[str, ...] = (),
        clock: Clock = time.time,
    ) -> None:
        self.knobs = knobs
        self.app = app
        self.state_path = state_path
        self.launcher = launcher
        self.commits = commits
        self.runner = runner
        self.cleanup_args = cleanup_args
        """Extra ``widehouse pulsar cleanup`` arguments (``--namespace`` of the catalog's topics)."""
        self.clock = clock

    # -- one cycle ---------------------------------------------------------------------------
    def cycle(self, plan: Plan) -> CycleReport:
        """Apply ``plan`` and judge every group once (one cycle at a time per state dir)."""
        with self._lock():
            return self._cycle(plan)

    @contextlib.contextmanager
    def _lock(self) -> Any:
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        with (self.state_path.parent / "lock").open("w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            yield

    def _cycle(self, plan: Plan) -> CycleReport:
        t0 = time.monotonic()
        state = SupervisorState.load(self.state_path)
        actions: list[Action] = []
        now = self.clock()
        desired = {g.name: sorted(g.topics) for g in plan.groups}
        unfinished = self._apply_plan_changes(state, desired, now, actions)
        if not unfinished:
            commits = self._read_commits()
            for name in sorted(desired):
                self._supervise(name, plan, state, commits, actions)
            self._cleanup(state, actions)
        # else a stopped group's cut batch is not committed yet: start nothing that could read its
        # topics (the next cycle tries again); groups that were running keep running
        state.save(self.state_path)
        given_up = {
            name: state.groups[name].last_failure
            for name in sorted(desired)
            if name in state.groups and state.groups[name].given_up
        }
        given_up.update(unfinished)  # reported (the task fails with it) until a cycle finishes it
        return CycleReport(tuple(actions), given_up, time.monotonic() - t0)

    def reset(self, group: str) -> None:
        """Forget a group's failures (an operator fixed the cause); the next cycle starts it."""
        with self._lock():
            self._reset(group)

    def _reset(self, group: str) -> None:
        state = SupervisorState.load(self.state_path)
        if group not in state.groups:
            raise OrchestrationError(
                f"slot group {group!r} is not supervised (known: {', '.join(state.groups)})"
            )
        old = state.groups[group]
        state.groups[group] = GroupState(topics=old.topics, restarted_at=old.restarted_at)  # history stays
        state.save(self.state_path)

    # -- steps -------------------------------------------------------------------------------
    def _apply_plan_changes(
        self, state: SupervisorState, desired: dict[str, list[str]], now: float, actions: list[Action]
    ) -> dict[str, str]:
        """Stop the groups the plan changes, finish the batches the stops cut, record the new topics.
        Returns the groups whose cut batch could not be committed, with why (they keep their old
        topics for now; the next cycle tries again)."""
        unfinished: dict[str, str] = {}
        for name in sorted(state.groups):
            current = state.groups[name]
            wanted = desired.get(name)
            if wanted == current.topics:
                continue
            stopped = self.launcher.stop(name)
            problem = self.launcher.finish(name)  # a batch cut by the stop, on the topics it read
            if problem is not None:  # keep the old topics; stopped, so the next cycle tries again
                actions.append(Action(name, "finishing", problem.splitlines()[0]))
                unfinished[name] = problem
                continue
            if wanted is None:
                del state.groups[name]
                state.retired[group_app_id(self.app, name)] = now
                actions.append(Action(name, "retired", "left the plan" + (" (stopped)" if stopped else "")))
                continue
            moved_in = sorted(set(wanted) - set(current.topics))
            moved_out = sorted(set(current.topics) - set(wanted))
            detail = f"plan change: +{len(moved_in)} -{len(moved_out)} topics"
            actions.append(Action(name, "stopped", detail))
            state.groups[name] = GroupState(topics=wanted, restarted_at=current.restarted_at)
        return unfinished

    def _read_commits(self) -> dict[str, float] | None:
        try:
            return self.commits()
        except ClickHouseError as exc:  # no stuck verdicts without progress; dead processes still count
            log.warning("cannot read stream progress, judging by processes only: %s", exc)
            return None

    def _supervise(
        self,
        name: str,
        plan: Plan,
        state: SupervisorState,
        commits: dict[str, float] | None,
        actions: list[Action],
    ) -> None:
        st = state.groups.setdefault(name, GroupState(topics=sorted(plan.group(name).topics)))
        now = self.clock()
        running = self.launcher.running(name)
        if running is not False and st.started_at is not None:
            label, verdict = self._health(name, st, commits, now)
            if verdict is None:
                actions.append(Action(name, label))
                return
            self.launcher.stop(name)
            self._failure(name, st, now, f"stuck: {verdict}")
            actions.append(Action(name, "stuck", verdict))
        elif running and st.started_at is None:
            st.started_at = now  # found running (e.g. state lost): adopt it, judge it from now on
            actions.append(Action(name, "adopted"))
            return
        elif st.started_at is not None:
            self._failure(name, st, now, "the process exited")
            actions.append(Action(name, "died"))
        if st.given_up:
            actions.append(
                Action(name, "given-up", st.last_failure.splitlines()[0] if st.last_failure else "")
            )
            return
        if now < st.next_start_at:
            actions.append(Action(name, "waiting", f"backoff: restart in {st.next_start_at - now:.0f}s"))
            return
        self.launcher.start(name, plan)
        st.started_at = self.clock()
        if st.failures:
            _record_restart(st, st.started_at)
        actions.append(Action(name, "restarted" if st.failures else "started"))

    def _health(
        self, name: str, st: GroupState, commits: dict[str, float] | None, now: float
    ) -> tuple[str, str | None]:
        """(healthy | starting | unknown, None) when alive, else ("stuck", why)."""
        assert st.started_at is not None  # checked by the caller
        if commits is None:
            return "unknown", None
        last = commits.get(name)
        if last is not None and last >= st.started_at:
            st.failures = 0  # committed since its start: a working app
            st.last_failure = ""
            if now - last <= self.knobs.stale_seconds:
                return "healthy", None
            return "stuck", f"last batch committed {now - last:.0f}s ago (> {self.knobs.stale_seconds:.0f}s)"
        if now - st.started_at <= self.knobs.startup_seconds:
            return "starting", None
        return "stuck", f"no batch committed in the {now - st.started_at:.0f}s since its start"

    def _failure(self, name: str, st: GroupState, now: float, why: str) -> None:
        st.failures += 1
        st.started_at = None
        log_tail = self.launcher.log_tail(name)
        st.last_failure = f"{why} (failure {st.failures} of {self.knobs.max_failures})\n{log_tail}"
        if st.failures >= self.knobs.max_failures:
            st.given_up = True
        else:
            st.next_start_at = now + restart_delay(st.failures, self.knobs)
        log.warning("slot group %s: %s (failure %d)", name, why, st.failures)

    def _cleanup(self, state: SupervisorState, actions: list[Action]) -> None:
        now = self.clock()
        for app, since in list(state.retired.items()):
            if now - since > RETIRED_KEEP_S:
                del state.retired[app]
        just_retired = any(a.what == "retired" for a in actions)
        due = state.retired and now - state.last_cleanup >= CLEANUP_INTERVAL_S
        if self.runner is None or not (just_retired or due):
            return
        result = self.runner(["pulsar", "cleanup", *self.cleanup_args], {})
        state.last_cleanup = now
        actions.append(
            Action("*", "cleanup", f"widehouse pulsar cleanup exited {result.code}: {result.tail[-300:]}")
        )


def _record_restart(st: GroupState, at: float) -> None:
    """Add a restart time; drop those older than :data:`RESTART_HISTORY_S` and beyond the cap."""
    kept = [t for t in st.restarted_at if t > at - RESTART_HISTORY_S]
    st.restarted_at = [*kept, at][-RESTART_HISTORY_MAX:]


def describe(report: CycleReport) -> str:
    """The cycle as task-log lines."""
    lines = [f"{a.group}: {a.what}" + (f" ({a.detail})" if a.detail else "") for a in report.actions]
    lines.append(f"cycle took {report.seconds:.2f}s")
    return "\n".join(lines)


def state_path_for(state_dir: Path) -> Path:
    return state_dir / "supervisor" / "state.json"


def as_json(report: CycleReport) -> dict[str, Any]:
    return {
        "actions": [dataclasses.asdict(a) for a in report.actions],
        "given_up": report.given_up,
        "seconds": report.seconds,
    }


def from_settings(settings: Settings, env: dict[str, str], runner: Runner | None) -> Supervisor:
    """The supervisor of ``settings``' deployment: launcher by ``WIDEHOUSE_SUPERVISOR_MODE`` (``local``:
    detached client-mode drivers, for any master; ``cluster``: YARN / Kubernetes cluster deploy mode),
    commits from its ClickHouse."""
    from widehouse import clickhouse
    from widehouse.orchestration.launch import ClusterLauncher, LocalLauncher, check_deploy_mode
    from widehouse.orchestration.progress import last_commits
    from widehouse.orchestration.replan import catalog_namespaces

    check_deploy_mode(settings)
    launcher: Launcher
    if settings.supervisor.mode == "cluster":
        launcher = ClusterLauncher(
            settings,
            plan_uri=str(settings.state_dir / "plan.json"),
            job=str(Path(__file__).resolve().parents[2] / "jobs" / "stream_wide.py"),
            env=env,
        )
    else:
        launcher = LocalLauncher(settings, env)

    def commits() -> dict[str, float]:
        client = clickhouse.connect(settings.clickhouse)
        try:
            return last_commits(client, settings.stream.app)
        finally:
            client.close()

    return Supervisor(
        settings.supervisor,
        settings.stream.app,
        state_path_for(settings.state_dir),
        launcher=launcher,
        commits=commits,
        runner=runner,
        cleanup_args=tuple(a for ns in catalog_namespaces(settings) for a in ("--namespace", ns)),
    )

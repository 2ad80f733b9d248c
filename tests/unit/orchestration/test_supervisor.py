"""The supervisor's decisions with a fake clock, fake processes and fake commits."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from widehouse.errors import ClickHouseError
from widehouse.orchestration.runner import JobResult
from widehouse.orchestration.supervisor import Supervisor, SupervisorState, restart_delay
from widehouse.planner import Group, Plan
from widehouse.settings import SupervisorSettings

KNOBS = SupervisorSettings(
    stale_seconds=60, startup_seconds=120, backoff_seconds=10, backoff_max_seconds=40, max_failures=4
)
T1, T2, T3 = ("persistent://t/n/a", "persistent://t/n/b", "persistent://t/n/c")


def make_plan(**groups: tuple[str, ...]) -> Plan:
    topics = [t for ts in groups.values() for t in ts]
    return Plan(
        groups=tuple(Group(name, ts, 1.0, 1, False) for name, ts in groups.items()),
        partitions=dict.fromkeys(topics, 1),
    )


@dataclass
class FakeLauncher:
    up: dict[str, tuple[str, ...]] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)
    cut: dict[str, str] = field(default_factory=dict)
    """Groups whose stop cut a batch -> why finishing it fails (removed to let it succeed)."""

    def start(self, group: str, plan: Plan) -> None:
        self.up[group] = plan.group(group).topics
        self.log.append(f"start {group}")

    def running(self, group: str) -> bool | None:
        return group in self.up

    def stop(self, group: str) -> bool:
        self.log.append(f"stop {group}")
        return self.up.pop(group, None) is not None

    def finish(self, group: str) -> str | None:
        self.log.append(f"finish {group}")
        return self.cut.get(group)

    def log_tail(self, group: str, lines: int = 30) -> str:
        return f"<{group} log>"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class World:
    sup: Supervisor
    launcher: FakeLauncher
    clock: Clock
    commits: dict[str, float]
    cleanups: list[list[str]]


@pytest.fixture
def world(tmp_path: Path) -> World:
    launcher, clock, commits, cleanups = FakeLauncher(), Clock(), {}, []

    def runner(args: object, env: object) -> JobResult:
        cleanups.append(list(args))  # type: ignore[call-overload]
        return JobResult(("widehouse",), 0, "ok")

    sup = Supervisor(
        KNOBS,
        "wh",
        tmp_path / "state.json",
        launcher=launcher,
        commits=lambda: dict(commits),
        runner=runner,
        clock=clock,
    )
    return World(sup, launcher, clock, commits, cleanups)


def test_starts_every_group_of_the_plan_once(world: World) -> None:
    plan = make_plan(g001=(T1, T2), g002=(T3,))
    report = world.sup.cycle(plan)
    assert report.of("g001") == ["started"] and report.of("g002") == ["started"]
    world.clock.now += 30
    report = world.sup.cycle(plan)  # within the startup grace: no commit needed yet
    assert report.of("g001") == ["starting"]
    assert world.launcher.log == ["start g001", "start g002"]


def test_a_committing_app_is_healthy_and_a_stale_one_is_restarted(world: World) -> None:
    plan = make_plan(g001=(T1,))
    world.sup.cycle(plan)
    world.clock.now += 30
    world.commits["g001"] = world.clock.now
    assert world.sup.cycle(plan).of("g001") == ["healthy"]
    world.clock.now += 61  # no batch for longer than stale_seconds
    report = world.sup.cycle(plan)
    assert report.of("g001") == ["stuck", "restarted"]
    assert world.launcher.log == ["start g001", "stop g001", "start g001"]


def test_no_first_batch_within_the_startup_grace_is_stuck(world: World) -> None:
    plan = make_plan(g001=(T1,))
    world.sup.cycle(plan)
    world.clock.now += 121
    assert world.sup.cycle(plan).of("g001") == ["stuck", "restarted"]


def test_a_dead_process_restarts_at_once_then_with_backoff_then_gives_up(world: World) -> None:
    plan = make_plan(g001=(T1,))
    world.sup.cycle(plan)
    delays = []
    for failure in range(1, 5):
        world.launcher.up.clear()  # SIGKILL
        world.clock.now += 1
        report = world.sup.cycle(plan)
        if failure == KNOBS.max_failures:
            assert report.of("g001") == ["died", "given-up"]
            assert "failure 4 of 4" in report.given_up["g001"] and "<g001 log>" in report.given_up["g001"]
            break
        waited = 0.0
        while report.of("g001")[-1] != "restarted":
            assert report.of("g001")[-1] == "waiting"
            world.clock.now += 1
            waited += 1
            report = world.sup.cycle(plan)
        delays.append(waited)
    assert delays == [0, 10, 20]  # at once, then 10 s * 2**(n-2)
    world.clock.now += 10_000
    assert world.sup.cycle(plan).of("g001") == ["given-up"]  # never restarted again
    world.sup.reset("g001")
    assert world.sup.cycle(plan).of("g001") == ["started"]


def test_a_commit_since_the_start_resets_the_failure_count(world: World) -> None:
    plan = make_plan(g001=(T1,))
    world.sup.cycle(plan)
    world.launcher.up.clear()
    world.sup.cycle(plan)  # died -> restarted at once (failure 1)
    world.clock.now += 5
    world.commits["g001"] = world.clock.now
    world.sup.cycle(plan)
    state = SupervisorState.load(world.sup.state_path)
    assert state.groups["g001"].failures == 0


def test_restart_delay_is_capped() -> None:
    assert [restart_delay(n, KNOBS) for n in range(1, 7)] == [0, 10, 20, 40, 40, 40]


def test_a_plan_change_stops_and_restarts_only_affected_groups(world: World) -> None:
    world.sup.cycle(make_plan(g001=(T1, T2), g002=(T3,)))
    world.launcher.log.clear()
    report = world.sup.cycle(make_plan(g001=(T1,), g002=(T2, T3)))  # T2 moved g001 -> g002
    assert report.of("g001") == ["stopped", "started"] and report.of("g002") == ["stopped", "started"]
    world.launcher.log.clear()
    report = world.sup.cycle(make_plan(g001=(T1,), g002=(T2, T3)))
    assert world.launcher.log == []


def test_a_batch_the_stop_cut_is_finished_before_any_group_starts_on_the_new_plan(world: World) -> None:
    """T2 moves g001 -> g002 while g001's stop cut a batch that read T2: g002 continues from g001's
    committed position, so nothing may start until that batch is committed (on g001's old topics)."""
    world.sup.cycle(make_plan(g001=(T1, T2), g003=(T3,)))
    world.launcher.log.clear()
    world.launcher.cut["g001"] = "finishing batch 10 failed with exit code 1:\n<g001 log>"
    moved = make_plan(g001=(T1,), g002=(T2,), g003=(T3,))
    report = world.sup.cycle(moved)
    assert world.launcher.log == ["stop g001", "finish g001"]  # g002 not started, g003 left alone
    assert report.of("g001") == ["finishing"] and report.given_up == {"g001": world.launcher.cut["g001"]}
    assert SupervisorState.load(world.sup.state_path).groups["g001"].topics == [T1, T2]
    del world.launcher.cut["g001"]  # e.g. ClickHouse is back
    world.launcher.log.clear()
    report = world.sup.cycle(moved)
    assert world.launcher.log[:2] == ["stop g001", "finish g001"]
    assert sorted(world.launcher.log[2:]) == ["start g001", "start g002"] and not report.given_up
    assert world.launcher.up == {"g001": (T1,), "g002": (T2,), "g003": (T3,)}


def test_a_group_that_left_the_plan_is_retired_and_its_subscriptions_cleaned(world: World) -> None:
    world.sup.cycle(make_plan(g001=(T1,), g002=(T2,)))
    report = world.sup.cycle(make_plan(g001=(T1, T2)))
    assert report.of("g002") == ["retired"]
    assert "g002" not in world.launcher.up
    assert world.cleanups == [["pulsar", "cleanup"]]
    assert SupervisorState.load(world.sup.state_path).retired == {"wh-g002": world.clock.now}
    world.sup.cycle(make_plan(g001=(T1, T2)))  # not again before the cleanup interval
    assert len(world.cleanups) == 1


def test_without_progress_only_dead_processes_count(world: World) -> None:
    plan = make_plan(g001=(T1,))
    world.sup.cycle(plan)

    def broken() -> dict[str, float]:
        raise ClickHouseError("ClickHouse at http://127.0.0.1:8123 is down")

    world.sup.commits = broken
    world.clock.now += 10_000
    assert world.sup.cycle(plan).of("g001") == ["unknown"]
    world.launcher.up.clear()
    assert world.sup.cycle(plan).of("g001") == ["died", "restarted"]


def test_unfinished_batch_reads_a_local_checkpoint(tmp_path: Path) -> None:
    from widehouse.orchestration.launch import unfinished_batch

    assert unfinished_batch(str(tmp_path / "none")) is None  # never started
    for batch in ("0", "1", "2"):
        (tmp_path / "offsets").mkdir(exist_ok=True)
        (tmp_path / "offsets" / batch).write_text("v1")
    (tmp_path / "offsets" / ".2.crc").write_text("")
    (tmp_path / "commits").mkdir()
    for batch in ("0", "1"):
        (tmp_path / "commits" / batch).write_text("v1")
    assert unfinished_batch(str(tmp_path)) == 2
    assert unfinished_batch(f"file://{tmp_path}") == 2
    (tmp_path / "commits" / "2").write_text("v1")
    assert unfinished_batch(str(tmp_path)) is None
    assert unfinished_batch("s3a://bucket/checkpoints/wh/g001") is None  # remote: not read here


def test_restarts_after_failures_are_kept_with_their_time_commits_and_resets_do_not_clear_them(
    world: World,
) -> None:
    plan = make_plan(g001=(T1,))
    world.sup.cycle(plan)  # started: not a restart
    first = world.clock.now + 1
    world.launcher.up.clear()
    world.clock.now = first
    assert world.sup.cycle(plan).of("g001") == ["died", "restarted"]
    world.commits["g001"] = world.clock.now + 5  # a committed batch resets the failures, not the history
    world.clock.now += 5
    world.sup.cycle(plan)
    state = SupervisorState.load(world.sup.state_path).groups["g001"]
    assert (state.failures, state.restarted_at) == (0, [first])
    world.clock.now += 61  # stale: stuck, restarted
    assert world.sup.cycle(plan).of("g001") == ["stuck", "restarted"]
    second = world.clock.now
    world.sup.reset("g001")
    state = SupervisorState.load(world.sup.state_path).groups["g001"]
    assert (state.failures, state.restarted_at) == (0, [first, second])
    assert state.restarts_between(first, second) == 1  # (since, until]
    # 14 days on, a new restart drops the ones older than the history
    world.sup.cycle(plan)  # started again after the reset: not a restart
    world.clock.now = second + 14 * 86400 + 1
    world.launcher.up.clear()
    assert world.sup.cycle(plan).of("g001") == ["died", "restarted"]
    assert SupervisorState.load(world.sup.state_path).groups["g001"].restarted_at == [world.clock.now]


def test_a_state_file_without_restart_times_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.write_text('{"groups": {"g001": {"topics": ["a"], "started_at": 1.0, "failures": 2}}}')
    assert SupervisorState.load(path).groups["g001"].restarted_at == []

"""The service manager's mechanics and failure paths, on small real processes (no JVM)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from widehouse.errors import ConfigError, PortInUseError, ServiceError
from widehouse.services import LocalService, ManagedProcess, PortSpec, ProcessSpec, ServiceManager
from widehouse.services import process as process_module
from widehouse.services.process import find_marked_pids, port_is_open, rotate_log
from widehouse.settings import LocalServicesSettings


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def held_port() -> Iterator[int]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    try:
        yield int(sock.getsockname()[1])
    finally:
        sock.close()


SERVER = textwrap.dedent(
    """
    import socket, sys, time, subprocess
    delay, port, spawn_child = float(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
    if spawn_child:
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    time.sleep(delay)
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port)); s.listen(16)
    print("listening", port, flush=True)
    while True:
        c, _ = s.accept(); c.close()
    """
)


class TinyService(LocalService):
    """A LocalService running a tiny Python TCP server: healthy once its port accepts."""

    def __init__(
        self,
        local: LocalServicesSettings,
        name: str,
        port: int,
        delay: float = 0.0,
        depends_on: tuple[str, ...] = (),
        argv: tuple[str, ...] | None = None,
        spawn_child: bool = False,
    ) -> None:
        self.name = name
        self.port = port
        self.delay = delay
        self.depends_on = depends_on
        self._argv = argv
        self.spawn_child = spawn_child
        super().__init__(local)

    def ports(self) -> tuple[PortSpec, ...]:
        return (PortSpec("tcp", self.port, f"WIDEHOUSE_TEST_{self.name.upper()}_PORT"),)

    def command(self) -> tuple[str, ...]:
        if self._argv is not None:
            return (*self._argv, self.marker)
        script = self.dir / "server.py"
        script.parent.mkdir(parents=True, exist_ok=True)
        script.write_text(SERVER)
        flag = "1" if self.spawn_child else "0"
        return (sys.executable, str(script), str(self.delay), str(self.port), flag, self.marker)

    def probe(self) -> str | None:
        return None if port_is_open(self.port, timeout=0.2) else "port closed"


@pytest.fixture
def local(tmp_path: Path) -> LocalServicesSettings:
    return LocalServicesSettings(
        state_dir=tmp_path / "state", vendor_dir=tmp_path / "vendor", start_timeout=10
    )


def test_up_starts_in_dependency_order_and_up_twice_is_harmless(local: LocalServicesSettings) -> None:
    a = TinyService(local, "a", free_port(), delay=0.3)
    b = TinyService(local, "b", free_port(), depends_on=("a",))
    events: list[str] = []
    manager = ServiceManager(local, services=[b, a], report=events.append)
    try:
        assert manager.up() == ["a", "b"]
        starting = [e for e in events if "starting" in e]
        assert starting[0].startswith("a:") and starting[1].startswith("b:")
        assert manager.healthy()
        pids = {s.name: s.pid for s in manager.status()}
        # a second `up` starts nothing and keeps the same processes
        again = ServiceManager(
            local, services=[TinyService(local, "a", a.port), TinyService(local, "b", b.port)]
        )
        assert again.up() == []
        assert {s.name: s.pid for s in again.status()} == pids
    finally:
        manager.down()
    assert [s.state for s in manager.status()] == ["stopped", "stopped"]


def test_up_of_one_service_brings_its_dependencies(local: LocalServicesSettings) -> None:
    a = TinyService(local, "a", free_port())
    b = TinyService(local, "b", free_port(), depends_on=("a",))
    manager = ServiceManager(local, services=[a, b])
    try:
        assert manager.up(["b"]) == ["a", "b"]
        # stopping a dependency also stops what depends on it
        assert manager.down(["a"]) == ["b", "a"]
    finally:
        manager.down()


def test_down_of_an_empty_selection_stops_nothing(local: LocalServicesSettings) -> None:
    a = TinyService(local, "a", free_port())
    b = TinyService(local, "b", free_port(), depends_on=("a",))
    manager = ServiceManager(local, services=[a, b])
    try:
        assert manager.up() == ["a", "b"]
        # what up_missing returns when every service already answered: stopping "what it started"
        # then used to stop every service of the state dir
        assert ServiceManager(local, services=[a, b]).up_missing() == []
        assert manager.down([]) == []
        assert manager.healthy()
    finally:
        manager.down()
    assert [s.state for s in manager.status()] == ["stopped", "stopped"]


def test_port_taken_names_service_port_and_setting(local: LocalServicesSettings, held_port: int) -> None:
    service = TinyService(local, "web", held_port)
    manager = ServiceManager(local, services=[service])
    with pytest.raises(PortInUseError) as info:
        manager.up()
    message = str(info.value)
    assert "cannot start web" in message
    assert f"127.0.0.1:{held_port}" in message
    assert "WIDEHOUSE_TEST_WEB_PORT" in message
    assert f"pid {os.getpid()}" in message  # who holds it, when we can see it
    assert manager.status()[0].state == "stopped"


def test_service_dying_at_start_reports_exit_code_and_log(local: LocalServicesSettings) -> None:
    argv = (sys.executable, "-c", "import sys; print('boom: config is broken', flush=True); sys.exit(3)")
    service = TinyService(local, "crashy", free_port(), argv=argv)
    manager = ServiceManager(local, services=[service])
    with pytest.raises(ServiceError) as info:
        manager.up()
    message = str(info.value)
    assert "crashy exited with code 3 while starting" in message
    assert "boom: config is broken" in message
    assert not service.process.spec.pid_file.exists()


def test_failure_stops_what_this_up_started(local: LocalServicesSettings) -> None:
    good = TinyService(local, "good", free_port())
    bad = TinyService(local, "bad", free_port(), argv=(sys.executable, "-c", "raise SystemExit(1)"))
    manager = ServiceManager(local, services=[good, bad])
    with pytest.raises(ServiceError, match="bad exited with code 1"):
        manager.up()
    assert not port_is_open(good.port)
    assert [s.state for s in manager.status()] == ["stopped", "stopped"]


def test_never_healthy_times_out_and_leaves_nothing(local: LocalServicesSettings) -> None:
    slow_local = LocalServicesSettings(
        state_dir=local.state_dir, vendor_dir=local.vendor_dir, start_timeout=1.5
    )
    service = TinyService(slow_local, "slow", free_port(), delay=60)
    manager = ServiceManager(slow_local, services=[service])
    with pytest.raises(ServiceError, match=r"slow did not become healthy within 2s \(port closed\)"):
        manager.up()
    assert find_marked_pids(service.marker) == []


def test_stale_pid_file_of_a_dead_process_is_ignored(local: LocalServicesSettings) -> None:
    service = TinyService(local, "a", free_port())
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    service.process.spec.pid_file.parent.mkdir(parents=True, exist_ok=True)
    service.process.spec.pid_file.write_text(f"{dead.pid} 12345\n")
    manager = ServiceManager(local, services=[service])
    assert manager.status()[0].state == "stopped"
    assert not service.process.spec.pid_file.exists()
    try:
        assert manager.up() == ["a"]
    finally:
        manager.down()


def test_pid_file_pointing_at_another_program_is_stale(local: LocalServicesSettings) -> None:
    """A recycled pid (alive, but started at another time) must not be taken for the service."""
    service = TinyService(local, "a", free_port())
    service.process.spec.pid_file.parent.mkdir(parents=True, exist_ok=True)
    service.process.spec.pid_file.write_text(f"{os.getpid()} 1\n")  # this test process, wrong start time
    assert service.process.pid() is None
    assert not service.process.spec.pid_file.exists()


def test_garbage_pid_file_is_removed(local: LocalServicesSettings) -> None:
    service = TinyService(local, "a", free_port())
    service.process.spec.pid_file.parent.mkdir(parents=True, exist_ok=True)
    service.process.spec.pid_file.write_text("not a pid")
    assert service.process.pid() is None
    assert not service.process.spec.pid_file.exists()


def test_down_stops_children_and_processes_without_pid_file(local: LocalServicesSettings) -> None:
    service = TinyService(local, "a", free_port(), spawn_child=True)
    manager = ServiceManager(local, services=[service])
    manager.up()
    leader = service.process.pid()
    assert leader is not None
    children = _group_members(leader)
    assert len(children) >= 2  # the server and the child it spawned
    service.process.spec.pid_file.unlink()  # lose the pid file: down must still find it by marker
    assert manager.down() == ["a"]
    assert all(not _alive(p) for p in children)
    assert not port_is_open(service.port)


def test_down_kills_a_process_that_ignores_sigterm(local: LocalServicesSettings) -> None:
    argv = (
        sys.executable,
        "-c",
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)",
    )
    spec = ProcessSpec(
        name="stubborn",
        argv=(*argv, "-Dwidehouse.service=stubborn-test"),
        cwd=local.state_dir,
        log_file=local.state_dir / "stubborn.log",
        pid_file=local.state_dir / "stubborn.pid",
        marker="-Dwidehouse.service=stubborn-test",
    )
    process = ManagedProcess(spec)
    pid = process.start()
    time.sleep(0.3)
    t0 = time.monotonic()
    assert process.stop(timeout=1.0)
    assert time.monotonic() - t0 < 10
    assert not _alive(pid)


def test_unknown_service_name(local: LocalServicesSettings) -> None:
    manager = ServiceManager(local, services=[TinyService(local, "a", free_port())])
    with pytest.raises(ConfigError, match="unknown service nope; known: a"):
        manager.up(["nope"])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def _group_members(pgid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[-1].split()
            except OSError:
                continue
            if fields[2] == str(pgid):
                members.append(int(entry.name))
    return members


def test_up_missing_leaves_services_answering_for_someone_else_alone(
    local: LocalServicesSettings, held_port: int
) -> None:
    # `a` answers on its port, held by another owner (another state dir's service): `up` would refuse
    # the port; `up_missing` starts only `b`, whose dependency answers already
    a = TinyService(local, "a", held_port)
    b = TinyService(local, "b", free_port(), depends_on=("a",))
    manager = ServiceManager(local, services=[a, b])
    with pytest.raises(PortInUseError):
        manager.up()
    try:
        assert manager.up_missing() == ["b"]
        assert manager.up_missing() == []  # everything answers now
        assert [s.state for s in manager.status()] == ["stopped", "running"]
    finally:
        manager.down()


def test_rotate_log_shifts_generations_and_drops_the_oldest(tmp_path: Path) -> None:
    log = tmp_path / "svc.log"
    for name, text in {"svc.log": "live-0123456789", "svc.log.1": "one", "svc.log.2": "two"}.items():
        (tmp_path / name).write_text(text)

    assert rotate_log(log, max_bytes=10, keep=2)

    assert not log.exists()
    assert (tmp_path / "svc.log.1").read_text() == "live-0123456789"
    assert (tmp_path / "svc.log.2").read_text() == "one"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["svc.log.1", "svc.log.2"]


def test_rotate_log_leaves_a_small_or_missing_log_alone(tmp_path: Path) -> None:
    log = tmp_path / "svc.log"
    assert not rotate_log(log, max_bytes=10, keep=3)
    log.write_text("123456789")  # 9 bytes, under the limit
    assert not rotate_log(log, max_bytes=10, keep=3)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["svc.log"]
    with pytest.raises(ValueError, match="keep must be at least 1, got 0"):
        rotate_log(log, max_bytes=1, keep=0)


def test_a_start_rotates_a_large_captured_log(
    local: LocalServicesSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(process_module, "LOG_ROTATE_BYTES", 1000)
    service = TinyService(local, "chatty", free_port())
    log = service.process.spec.log_file
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("x" * 1000 + "\nthe last run's final line\n")
    manager = ServiceManager(local, services=[service])
    try:
        manager.up()
        assert "the last run's final line" in log.with_name("chatty.log.1").read_text()
        assert "the last run's final line" not in log.read_text()
        assert "==== widehouse: starting chatty" in log.read_text()
    finally:
        manager.down()


def test_a_log_that_cannot_be_rotated_is_appended_to(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = tmp_path / "svc.log"
    log.write_text("0123456789")
    blocker = tmp_path / "svc.log.1"
    blocker.mkdir()
    (blocker / "inside").write_text("a directory where the newest rotated log would go")

    assert not rotate_log(log, max_bytes=10, keep=1)

    assert log.read_text() == "0123456789"
    assert "could not rotate" in caplog.text and str(log) in caplog.text

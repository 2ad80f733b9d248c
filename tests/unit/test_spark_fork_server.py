"""The fork server of a local driver's Python processes: what it forks, what it declines, and a real
server and launcher pair running a probe module as Spark would run its own."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from widehouse.spark import fork_server
from widehouse.spark.fork_launcher import SERVER
from widehouse.spark.fork_server import Request, child_path, refusal

PROBE = """
import json, os, sys, time
out = {
    "pid": os.getpid(), "ppid": os.getppid(), "argv": sys.argv, "cwd": os.getcwd(),
    "name": __name__, "flavour": os.environ.get("PROBE_FLAVOUR"),
    "preloaded": "pyspark.daemon" in sys.modules, "path_head": sys.path[:2],
    "asked_preloaded": "xml.dom.minidom" in sys.modules,
    "stdin": sys.stdin.read() if "--read" in sys.argv else "",
    "frozen": __import__("gc").get_freeze_count(), "collecting": __import__("gc").isenabled(),
}
if "--numpy" in sys.argv:
    import numpy.random
    out["numpy"] = int(numpy.random.randint(2**62))
    read, write = os.pipe()
    if os.fork() == 0:  # as pyspark's daemon forks its workers
        os.write(write, str(numpy.random.randint(2**62)).encode())
        os._exit(0)
    os.close(write)
    out["numpy_after"] = int(numpy.random.randint(2**62))
    out["numpy_grandchild"] = int(os.read(read, 64))
    os.wait()
open(os.environ["PROBE_OUT"], "w").write(json.dumps(out))
print("to stdout", flush=True)
print("to stderr", file=sys.stderr, flush=True)
if "--sleep" in sys.argv:
    time.sleep(60)
sys.exit(int(os.environ.get("PROBE_EXIT", "0")))
"""


def _request(*argv: str, **env: str) -> Request:
    return Request(list(argv), "/work", dict(env))


OWN = {"PYTHONHASHSEED": "0", "PYTHONUNBUFFERED": "YES", "PYTHONPATH": "/spark/pyspark.zip:/spark/py4j.zip"}


def test_a_request_like_sparks_is_forked() -> None:
    wanted = _request(
        "-m", "pyspark.daemon", "pyspark.worker", **{**OWN, "PYTHONPATH": OWN["PYTHONPATH"] + ":/files"}
    )
    assert refusal(wanted, OWN, threads=1) is None


@pytest.mark.parametrize(
    ("argv", "env", "threads", "said"),
    [
        (("-c", "import sys"), OWN, 1, "not `-m pyspark."),
        (("-m", "os"), OWN, 1, "not `-m pyspark."),
        (("pyspark/daemon.py",), OWN, 1, "not `-m pyspark."),
        (("-m", "pyspark.daemon"), {**OWN, "PYTHONHASHSEED": "7"}, 1, "other PYTHONHASHSEED"),
        (
            ("-m", "pyspark.daemon"),
            {k: v for k, v in OWN.items() if k != "PYTHONUNBUFFERED"},
            1,
            "PYTHONUNBUFFERED",
        ),
        (("-m", "pyspark.daemon"), {**OWN, "PYTHONOPTIMIZE": "1"}, 1, "other PYTHONOPTIMIZE"),
        (("-m", "pyspark.daemon"), {**OWN, "LD_PRELOAD": "/lib/x.so"}, 1, "other LD_PRELOAD"),
        (("-m", "pyspark.daemon"), {**OWN, "SPARK_TESTING": "1"}, 1, "other SPARK_TESTING"),
        (("-m", "pyspark.daemon"), {**OWN, "OPENBLAS_NUM_THREADS": "4"}, 1, "OPENBLAS_NUM_THREADS"),
        (("-m", "pyspark.daemon"), {**OWN, "ARROW_DEFAULT_MEMORY_POOL": "system"}, 1, "ARROW_DEFAULT"),
        (
            ("-m", "pyspark.daemon"),
            {**OWN, "PYTHONPATH": "/other/pyspark.zip:/spark/py4j.zip"},
            1,
            "PYTHONPATH",
        ),
        (("-m", "pyspark.daemon"), {**OWN, "PYTHONPATH": "/spark/pyspark.zip"}, 1, "PYTHONPATH"),
        (("-m", "pyspark.daemon"), OWN, 2, "runs 2 threads"),
    ],
)
def test_a_child_that_would_not_be_a_new_interpreter_is_declined(
    argv: tuple[str, ...], env: dict[str, str], threads: int, said: str
) -> None:
    reason = refusal(_request(*argv, **env), OWN, threads=threads)
    assert reason is not None and said in reason


def test_spark_puts_its_own_entries_between_the_servers() -> None:
    """Spark's path is its zips, its jar, the context's files dirs, then the driver's PYTHONPATH."""
    own = {**OWN, "PYTHONPATH": "/spark/pyspark.zip:/spark/py4j.zip:/lib"}
    path = "/spark/pyspark.zip:/spark/py4j.zip:/spark/core.jar:/files:/files/streaming_job:/lib"
    assert refusal(_request("-m", "pyspark.daemon", **{**own, "PYTHONPATH": path}), own, threads=1) is None
    backwards = "/spark/pyspark.zip:/lib:/spark/py4j.zip"
    reason = refusal(_request("-m", "pyspark.daemon", **{**own, "PYTHONPATH": backwards}), own, threads=1)
    assert reason is not None and "in order" in reason


def test_runtime_variables_may_differ() -> None:
    """Spark's secrets and ports, read by the worker when it runs, differ in every request."""
    wanted = _request("-m", "pyspark.daemon", **OWN, PYTHON_WORKER_FACTORY_SECRET="s", SPARK_REUSE_WORKER="1")
    assert refusal(wanted, OWN, threads=1) is None


def test_the_pulsar_client_loaded_declines_and_numpys_random_does_not() -> None:
    """What the server has loaded (its ``sys.modules``): a library whose random state cannot be
    drawn again stops it forking; numpy's, drawn again in every fork, does not."""
    wanted = _request("-m", "pyspark.daemon", **OWN)
    reason = refusal(wanted, OWN, threads=1, loaded={"_pulsar": None, "pyarrow": None})
    assert reason is not None and "_pulsar" in reason and "pyarrow" not in reason
    assert refusal(wanted, OWN, threads=1, loaded={"numpy.random": None, "pandas": None}) is None


def test_a_childs_path_is_a_new_interpreters() -> None:
    own_path = ["/server/cwd", "/spark/pyspark.zip", "/spark/py4j.zip", "/usr/lib/python311.zip", "/site"]
    wanted = Request(
        ["-m", "pyspark.daemon"], "/job", {"PYTHONPATH": "/spark/pyspark.zip:/spark/py4j.zip:/files"}
    )
    assert child_path(wanted, own_path, OWN) == [
        "/job",
        "/spark/pyspark.zip",
        "/spark/py4j.zip",
        "/files",
        "/usr/lib/python311.zip",
        "/site",
    ]


# -- a real server and launcher ------------------------------------------------------------------------
@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[tuple[fork_server.ForkServer, Path]]:
    """A fork server of this interpreter (pyspark's daemon preloaded, modules ``forkprobe*`` allowed)
    and the dir the probe module is in; numpy's BLAS single-threaded, as a driver starts it."""
    with _serving(monkeypatch, tmp_path, "xml.dom.minidom") as server:
        yield server, tmp_path / "probe"


@contextmanager
def _serving(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, preload: str
) -> Iterator[fork_server.ForkServer]:
    """A fork server preloading ``preload``, modules ``forkprobe*`` allowed, the probe in
    ``tmp_path/probe``; numpy's BLAS single-threaded, as a driver starts it."""
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    (tmp_path / "probe").mkdir()
    (tmp_path / "probe" / "forkprobe.py").write_text(PROBE)
    server = fork_server.start(tmp_path / "forks", [], (preload,), allow=("forkprobe",))
    assert server is not None and server.wait_ready()
    try:
        yield server
    finally:
        server.stop()


def _launch(
    server: fork_server.ForkServer, probe: Path, tmp_path: Path, *args: str, named: bool = True, **env: str
) -> subprocess.Popen[str]:
    environ = fork_server.server_env(os.environ, [])  # what Spark gives its Python processes
    environ["PYTHONPATH"] = os.pathsep.join(filter(None, [environ["PYTHONPATH"], str(probe)]))
    environ.update({"PROBE_OUT": str(tmp_path / "out.json"), **env})
    if named:
        environ[SERVER] = server.name
    command = [str(server.launcher), "-m", "forkprobe", *args]
    return subprocess.Popen(
        command,
        env=environ,
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _probe(tmp_path: Path, timeout: float = 20, name: str = "out.json") -> dict[str, object]:
    out = tmp_path / name
    deadline = time.monotonic() + timeout
    while not (out.exists() and out.stat().st_size):
        assert time.monotonic() < deadline, "the probe never ran"
        time.sleep(0.05)
    return dict(json.loads(out.read_text()))


def test_a_forked_child_runs_what_the_launcher_was_asked_with_its_streams_and_exit(
    served: tuple[fork_server.ForkServer, Path], tmp_path: Path
) -> None:
    server, probe = served
    launched = _launch(server, probe, tmp_path, "--read", "x y", PROBE_FLAVOUR="mint", PROBE_EXIT="3")
    stdout, stderr = launched.communicate("from stdin", timeout=30)
    seen = _probe(tmp_path)
    assert launched.returncode == 3
    assert (stdout, stderr.splitlines()[-1]) == ("to stdout\n", "to stderr")
    assert seen["ppid"] == server.process.pid and seen["pid"] != launched.pid  # forked by the server
    assert seen["preloaded"] is True  # pyspark imported before the request, not by the child
    assert seen["asked_preloaded"] is True  # and what the server was asked to import
    # the preloaded objects out of the collector's reach (no copy of their pages), which still runs
    assert int(str(seen["frozen"])) > 10_000 and seen["collecting"] is True
    assert seen["name"] == "__main__" and seen["flavour"] == "mint" and seen["stdin"] == "from stdin"
    assert seen["argv"] == [str(probe / "forkprobe.py"), "--read", "x y"]
    assert seen["cwd"] == str(tmp_path) and seen["path_head"][0] == str(tmp_path)
    assert str(probe) in seen["path_head"] or str(probe) in os.environ.get("PYTHONPATH", "") + str(probe)
    assert Path(f"/proc/{seen['pid']}").exists() is False  # reaped


def test_a_signal_to_the_launcher_reaches_the_child_and_its_end_is_the_launchers(
    served: tuple[fork_server.ForkServer, Path], tmp_path: Path
) -> None:
    server, probe = served
    launched = _launch(server, probe, tmp_path, "--sleep")
    child = int(str(_probe(tmp_path)["pid"]))
    launched.send_signal(signal.SIGTERM)  # what the JVM's Process.destroy() sends
    assert launched.wait(timeout=20) == -signal.SIGTERM
    assert not _alive(child)


def test_a_killed_launchers_child_is_killed(
    served: tuple[fork_server.ForkServer, Path], tmp_path: Path
) -> None:
    server, probe = served
    launched = _launch(server, probe, tmp_path, "--sleep")
    child = int(str(_probe(tmp_path)["pid"]))
    launched.kill()
    launched.wait(timeout=20)
    deadline = time.monotonic() + 20
    while _alive(child):
        assert time.monotonic() < deadline, "the child outlived its launcher"
        time.sleep(0.05)


def test_a_declined_request_runs_the_real_interpreter(
    served: tuple[fork_server.ForkServer, Path], tmp_path: Path
) -> None:
    server, probe = served
    launched = _launch(server, probe, tmp_path, PYTHONHASHSEED="123")
    assert launched.wait(timeout=30) == 0
    seen = _probe(tmp_path)
    assert seen["pid"] == launched.pid and seen["preloaded"] is False  # exec'd: a new interpreter
    assert seen["asked_preloaded"] is False
    assert seen["frozen"] == 0 and seen["collecting"] is True


def test_without_a_server_the_launcher_is_the_real_interpreter(
    served: tuple[fork_server.ForkServer, Path], tmp_path: Path
) -> None:
    server, probe = served
    launched = _launch(server, probe, tmp_path, named=False, PROBE_EXIT="4")
    assert launched.wait(timeout=30) == 4
    assert _probe(tmp_path)["pid"] == launched.pid


def test_the_server_ends_with_its_driver_once_its_children_have(
    served: tuple[fork_server.ForkServer, Path], tmp_path: Path
) -> None:
    server, probe = served
    launched = _launch(server, probe, tmp_path, "--sleep")
    child = int(str(_probe(tmp_path)["pid"]))
    assert server.process.stdin is not None
    server.process.stdin.close()  # as when the driver's process ends
    time.sleep(0.5)
    assert server.process.poll() is None  # a child still runs: its end must still be reported
    os.kill(child, signal.SIGKILL)
    assert launched.wait(timeout=20) == -signal.SIGKILL
    assert server.process.wait(timeout=20) == 0


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


# -- the launcher's file -------------------------------------------------------------------------------
def test_the_launcher_is_written_once_private_and_runs_without_site(tmp_path: Path) -> None:
    first = fork_server.write_launcher(tmp_path / "forks", sys.executable)
    again = fork_server.write_launcher(tmp_path / "forks", sys.executable)
    assert first == again and stat.S_IMODE(first.stat().st_mode) == 0o700
    assert stat.S_IMODE(first.parent.stat().st_mode) == 0o700
    lines = first.read_text().splitlines()
    assert lines[0] == f"#!{sys.executable} -IS"
    assert f"REAL = {sys.executable!r}" in lines
    assert fork_server.is_launcher(str(first))
    assert not fork_server.is_launcher(sys.executable)
    assert not fork_server.is_launcher(str(first), python="/usr/bin/python3-elsewhere")


def test_a_launcher_others_could_change_is_refused(tmp_path: Path) -> None:
    path = fork_server.write_launcher(tmp_path / "forks", sys.executable)
    path.chmod(0o777)
    with pytest.raises(PermissionError, match="fork launcher"):
        fork_server.write_launcher(tmp_path / "forks", sys.executable)


# -- when a driver uses one ------------------------------------------------------------------------------
def _settings(tmp_path: Path, **extra: str):  # type: ignore[no-untyped-def]
    from widehouse.settings import load_settings

    return load_settings(
        {"WIDEHOUSE_STATE_DIR": str(tmp_path / "state"), "WIDEHOUSE_VENDOR_DIR": str(tmp_path), **extra}
    )


@pytest.mark.parametrize(
    ("extra", "python", "wanted"),
    [
        ({}, None, True),
        ({"WIDEHOUSE_SPARK_FORKS_DIR": "off"}, None, False),
        ({}, "/opt/other/bin/python3", False),  # the user's own interpreter for Spark's processes
    ],
)
def test_a_local_driver_on_this_interpreter_starts_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, extra: dict[str, str], python: str | None, wanted: bool
) -> None:
    from pyspark import SparkContext

    from widehouse.spark import session

    started: list[Path] = []
    monkeypatch.setattr(fork_server, "ensure", lambda directory, zips, preload: started.append(directory))
    monkeypatch.setenv("PYSPARK_PYTHON", python or sys.executable)
    monkeypatch.setattr(SparkContext, "_active_spark_context", None)  # the suite's session may run
    session._fork_server(_settings(tmp_path, **extra), {}, ())
    assert started == ([tmp_path / "spark-forks"] if wanted else [])


def test_only_jemallocs_thread_may_run_beside_a_fork() -> None:
    """pyarrow's allocator starts its background thread at import: a server with pyarrow imported
    still forks; a thread of any other kind stops it."""
    script = (
        "import threading, time\n"
        "import pyarrow\n"
        "from widehouse.spark.fork_state import thread_count\n"
        "alone = thread_count()\n"
        "threading.Thread(target=time.sleep, args=(5,), daemon=True).start()\n"
        "print(alone, thread_count())\n"
    )
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["1", "2"]


def test_a_driver_whose_context_runs_starts_none(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """getOrCreate hands back the running session: its JVM took its Python long ago."""
    from pyspark import SparkContext

    from widehouse.spark import session

    started: list[Path] = []
    monkeypatch.setattr(fork_server, "ensure", lambda directory, zips, preload: started.append(directory))
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    monkeypatch.setattr(SparkContext, "_active_spark_context", object())
    assert session._fork_server(_settings(tmp_path), {}, ()) is None
    assert started == []


def test_a_server_with_pulsars_library_loaded_declines(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Children forked after the Pulsar C++ client loaded name their readers alike (ConsumerBusy)."""
    with _serving(monkeypatch, tmp_path, "_pulsar") as server:
        launched = _launch(server, tmp_path / "probe", tmp_path)
        assert launched.wait(timeout=30) == 0
        assert _probe(tmp_path)["pid"] == launched.pid  # the real interpreter, not a fork


def test_numpys_random_state_is_drawn_again_in_every_fork(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A server that loaded numpy's random module (pandas does) still forks, and each child draws its
    own numbers, as a new interpreter's import would, and so does each process a child forks (as
    pyspark's daemon forks its workers)."""
    with _serving(monkeypatch, tmp_path, "numpy.random") as server:
        seen = []
        for name in ("first.json", "second.json"):
            launched = _launch(
                server, tmp_path / "probe", tmp_path, "--numpy", PROBE_OUT=str(tmp_path / name)
            )
            assert launched.wait(timeout=30) == 0
            seen.append(_probe(tmp_path, name=name))
        assert [s["ppid"] for s in seen] == [server.process.pid] * 2  # forked, not declined
        assert seen[0]["numpy"] != seen[1]["numpy"]  # two siblings
        assert all(s["numpy_after"] != s["numpy_grandchild"] for s in seen)  # a child and its own fork

"""Spark's Python processes forked from a warm interpreter instead of started cold.

A local driver's JVM starts a Python process for each thing Python does for it: a daemon per worker
module (the Python data source's planners ``create_data_source`` and ``plan_data_source_read``, the
task workers), and a process per streaming query (the source runner). Each starts an interpreter
and imports pyspark and then our library from nothing: ~0.3-0.6 core-s each, half a dozen on a
stream app's path to its first batch on this project's 2-core box (NOTES, issue 28).

A driver on ``local[*]`` starts a *fork server* as its session is built (:func:`ensure`): a
process of this interpreter, with the environment Spark gives its Python processes, that imports
pyspark's daemon and planner modules (and the modules the caller names, e.g. the stream's source)
while the JVM starts, and then forks a child per request. The JVM's ``PYSPARK_PYTHON`` is a launcher
(:mod:`widehouse.spark.fork_launcher`) that asks the server to fork a child running what Spark asked
for (``-m <module> [args]``) with the launcher's working dir, environment and standard streams, and
waits for it, passing on signals and its exit.

The server declines, and the launcher becomes the real interpreter, when a child could not be what a
new interpreter would be: a command other than ``-m pyspark...``; an environment whose
interpreter-start settings differ from the server's (:data:`START_VARIABLES`: ``PYTHONHASHSEED``,
``PYTHONUNBUFFERED``, ...); a ``PYTHONPATH`` not led by the zip the server imported pyspark from, or
without all of the server's entries in their order (Spark puts its jar and the context's files dirs
between its zips and the driver's own ``PYTHONPATH``); or a thread in the server besides its own and
jemalloc's background thread (pyarrow's allocator, which takes its locks around a fork itself):
forking beside any other thread is unsafe; or a loaded library whose per-process random state no
one can draw again (the Pulsar C++ client). numpy's global random state, which pandas loads, is
drawn again in every fork, and the preloaded objects are frozen out of the collector's reach
(:mod:`widehouse.spark.fork_state`). Only this user's processes are served (the peer's
credentials), on an abstract socket that leaves no file. The server ends when its driver does (its
standard input closes), after its children's exits are reported. ``WIDEHOUSE_SPARK_FORKS_DIR``
(default ``<vendor>/spark-forks``) keeps the launchers; ``off`` starts every Python process as
before. Cluster masters never use it (their executors start their own Python).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import marshal
import os
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Container, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from widehouse.private import others_could_change, private_dir
from widehouse.spark import fork_launcher
from widehouse.spark.environ import environ_set
from widehouse.spark.fork_launcher import PROTOCOL, SERVER
from widehouse.spark.fork_state import FORK_UNSAFE, frozen_after, reseed_after_fork, thread_count

log = logging.getLogger(__name__)

PRELOAD = (
    "pyspark.daemon",
    "pyspark.worker",
    "pyspark.sql.worker.create_data_source",
    "pyspark.sql.worker.plan_data_source_read",
    "pyspark.sql.streaming.python_streaming_source_runner",
)
"""Imported by every server: what Spark's daemons, planners and source runners import before they
work (pyarrow among it)."""
MODULE_PREFIX = "pyspark."
"""The only modules a child runs (``-m``): Spark's own Python processes."""
START_VARIABLES = re.compile(
    r"^(PYTHON(?!PATH$)[A-Z]*|LD_[A-Z_]+|GLIBC_TUNABLES|MALLOC_[A-Z_]+|"
    r"PYSPARK_ENABLE_NAMEDTUPLE_PATCH|SPARK_TESTING|OPENBLAS_NUM_THREADS|ARROW_[A-Z_]+|JE_ARROW_MALLOC_CONF)$"
)
"""Variables read as an interpreter starts or as the preloaded modules are imported: a request must
carry the server's values of them (``PYTHONPATH`` is compared apart). Not ``OMP_NUM_THREADS``, which
Spark sets for its workers to ``spark.task.cpus``: numpy's BLAS takes ``OPENBLAS_NUM_THREADS`` first,
which the driver sets before the server starts (``blas_single_threaded``)."""
WORKER_ENV = {"PYTHONUNBUFFERED": "YES"}
"""What Spark adds to its Python processes' environment that the interpreter reads as it starts."""
HASH_SEED = ("PYTHONHASHSEED", "0")
"""pyspark gives its Python processes the driver's ``PYTHONHASHSEED``, else this one."""
LAUNCHER_PREFIX = "python-"
MAX_REQUEST = 1 << 22
"""A request's largest size: arguments and an environment, far under it."""


class ForkRequestError(Exception):
    """A request the server cannot read (closed early, too long, not the launcher's format)."""


# -- the server --------------------------------------------------------------------------------------
@dataclass
class Request:
    """A launcher's request: ``argv`` after the interpreter, its working dir, environment and fds."""

    argv: list[str]
    cwd: str
    env: dict[str, str]
    fds: list[int] = field(default_factory=list)

    def close_fds(self) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = []


def read_request(conn: socket.socket) -> Request:
    """Read one request (its standard streams arrive with its first bytes)."""
    fds: list[int] = []
    head, ancillary, _flags, _addr = conn.recvmsg(4, socket.CMSG_SPACE(3 * 4))
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.extend(struct.unpack(f"{len(data) // 4}i", data[: len(data) - len(data) % 4]))
    request = Request([], "", {}, fds)
    try:
        while len(head) < 4:
            more = conn.recv(4 - len(head))
            if not more:
                raise ForkRequestError("the launcher closed before its request's length")
            head += more
        (size,) = struct.unpack("!I", head)
        if size > MAX_REQUEST:
            raise ForkRequestError(f"a request of {size} bytes (at most {MAX_REQUEST})")
        body = bytearray()
        while len(body) < size:
            more = conn.recv(min(size - len(body), 1 << 16))
            if not more:
                raise ForkRequestError(f"the launcher closed after {len(body)} of {size} bytes")
            body += more
        try:
            # a process of this user (the peer's credentials were checked) running the launcher
            version, argv, cwd, env = marshal.loads(bytes(body))  # noqa: S302
        except (ValueError, EOFError, TypeError) as exc:
            raise ForkRequestError(f"not a launcher's request: {exc}") from exc
        if version != PROTOCOL or len(fds) != 3:
            raise ForkRequestError(f"protocol {version} with {len(fds)} streams (want {PROTOCOL} with 3)")
        request.argv, request.cwd, request.env = list(argv), str(cwd), dict(env)
    except BaseException:
        request.close_fds()
        raise
    return request


def python_path(value: str | None) -> list[str]:
    return [entry for entry in (value or "").split(os.pathsep) if entry]


def refusal(
    request: Request,
    own_env: Mapping[str, str],
    threads: int,
    allowed: Sequence[str] = (MODULE_PREFIX,),
    loaded: Container[str] = (),
) -> str | None:
    """Why a child of this server would not be what ``python <request.argv>`` would be, or is not
    one it serves; None: fork. ``own_env`` is the environment the server started with, ``threads``
    its threads now, ``allowed`` the prefixes of the modules it runs, ``loaded`` the modules loaded
    in it (its ``sys.modules``)."""
    argv = request.argv
    if len(argv) < 2 or argv[0] != "-m" or not argv[1].startswith(tuple(allowed)):
        return f"runs {' '.join(argv[:2])!r}, not `-m {MODULE_PREFIX}...`"
    names = {n for n in (*own_env, *request.env) if START_VARIABLES.match(n)}
    differ = sorted(n for n in names if own_env.get(n) != request.env.get(n))
    if differ:
        return f"its interpreter would start with other {', '.join(differ)}"
    own = python_path(own_env.get("PYTHONPATH"))
    wanted = python_path(request.env.get("PYTHONPATH"))
    if own and (wanted[:1] != own[:1] or not _in_order(own, wanted)):
        return "its PYTHONPATH is not led by pyspark's zip and holds not all of the server's in order"
    if threads != 1:
        return f"the server runs {threads} threads"
    shared = [name for name in FORK_UNSAFE if name in loaded]
    if shared:
        return f"the server has {', '.join(shared)} loaded, whose state its children would share"
    return None


def _in_order(items: Sequence[str], within: Sequence[str]) -> bool:
    """Whether ``items`` appear in ``within`` in the same order (others may come between)."""
    rest = iter(within)
    return all(item in rest for item in items)


def child_path(request: Request, own_path: Sequence[str], own_env: Mapping[str, str]) -> list[str]:
    """``sys.path`` for a child: what ``python -m`` in the request's dir with its ``PYTHONPATH``
    would have, given the server's own (whose first entry is its dir, then its ``PYTHONPATH``)."""
    rest = list(own_path[1 + len(python_path(own_env.get("PYTHONPATH"))) :])
    return [request.cwd, *python_path(request.env.get("PYTHONPATH")), *rest]


def run_child(request: Request, own_path: Sequence[str], own_env: Mapping[str, str]) -> NoReturn:
    """In a forked child: become ``python <request.argv>`` and exit as it would."""
    import runpy

    code: int = 1
    try:
        for number in (*fork_launcher.FORWARDED, signal.SIGCHLD):
            signal.signal(number, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as a new interpreter has it
        for target, fd in enumerate(request.fds):
            os.dup2(fd, target)
        request.close_fds()
        os.chdir(request.cwd)
        os.environ.clear()
        os.environ.update(request.env)
        sys.path[:] = child_path(request, own_path, own_env)
        sys.argv[:] = [request.argv[1], *request.argv[2:]]
        _show_as([sys.executable, *request.argv])
        # run as `-m` runs it: the module's code as __main__, not the preloaded module object
        sys.modules.pop(request.argv[1], None)
        runpy.run_module(request.argv[1], run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, int) and exc.code is not None:
            print(exc.code, file=sys.stderr)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            threading._shutdown()  # type: ignore[attr-defined]  # an interpreter's exit waits for them
        import atexit

        with contextlib.suppress(BaseException):
            atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(BaseException):
                stream.flush()
        os._exit(code)


def _show_as(command: Sequence[str]) -> None:
    """Show this process as ``command`` (``ps``, ``/proc/<pid>/cmdline``), as if started so."""
    try:
        from setproctitle import setproctitle
    except ImportError:  # it shows as the fork server, and works the same
        return
    setproctitle(" ".join(command))


class Server:
    """The fork server's loop: accept, fork, report exits; one thread, no ``selectors`` object."""

    def __init__(self, listener: socket.socket, own_env: Mapping[str, str], allowed: Sequence[str]) -> None:
        self.listener = listener
        self.allowed = tuple(allowed)
        self.own_env = dict(own_env)
        self.own_path = list(sys.path)
        self.children: dict[int, socket.socket] = {}
        self.wake_read, self.wake_write = os.pipe()
        os.set_blocking(self.wake_write, False)
        signal.set_wakeup_fd(self.wake_write)
        signal.signal(signal.SIGCHLD, lambda _n, _f: None)  # wakes the poll through the wake-up fd
        self.accepting = True
        self.declined: set[str] = set()

    def serve(self) -> None:
        poll = select.poll()
        poll.register(0, select.POLLIN)
        poll.register(self.listener, select.POLLIN)
        poll.register(self.wake_read, select.POLLIN)
        by_fd: dict[int, int] = {}
        while self.accepting or self.children:
            for fd, _event in poll.poll(1000):
                if fd == 0:  # the driver ended (or wrote, which it never does): no more children
                    if not os.read(0, 4096):
                        poll.unregister(0)
                        poll.unregister(self.listener)
                        self.listener.close()
                        self.accepting = False
                elif fd == self.listener.fileno() and self.accepting:
                    pid = self.accept()
                    if pid:
                        conn = self.children[pid]
                        by_fd[conn.fileno()] = pid
                        poll.register(conn, select.POLLIN)
                elif fd == self.wake_read:
                    with contextlib.suppress(BlockingIOError):
                        os.read(self.wake_read, 4096)
                elif fd in by_fd:  # a launcher went away (killed): so does its child
                    with contextlib.suppress(OSError):
                        os.kill(by_fd[fd], signal.SIGKILL)
                    poll.unregister(fd)
                    del by_fd[fd]
            for conn in self.reap():
                if conn.fileno() in by_fd:
                    poll.unregister(conn)
                    del by_fd[conn.fileno()]
                conn.close()

    def reap(self) -> Iterator[socket.socket]:
        """The connections of children that ended, their status sent to their launchers."""
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.children.pop(pid, None)
            if conn is None:
                continue
            with contextlib.suppress(OSError):
                conn.sendall(struct.pack("!i", status))
            yield conn

    def accept(self) -> int | None:
        """Serve one connection: the forked child's pid, or None when none was forked."""
        conn, _ = self.listener.accept()
        try:
            pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
            if uid != os.getuid():
                conn.close()
                return None
            conn.settimeout(10)
            request = read_request(conn)
        except (OSError, ForkRequestError) as exc:
            print(f"widehouse fork server: a request not served: {exc}", file=sys.stderr)
            conn.close()
            return None
        reason = refusal(request, self.own_env, thread_count(), self.allowed, sys.modules)
        if reason is not None:
            if reason not in self.declined:  # once per reason: the launcher starts Python itself
                self.declined.add(reason)
                print(f"widehouse fork server: not forking for {pid}: {reason}", file=sys.stderr)
            request.close_fds()
            with contextlib.suppress(OSError):
                conn.sendall(struct.pack("!i", 0))
            conn.close()
            return None
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        child = os.fork()
        if child == 0:
            signal.set_wakeup_fd(-1)
            for fd in (self.wake_read, self.wake_write, 0):
                with contextlib.suppress(OSError):
                    os.close(fd)
            self.listener.close()
            conn.close()
            for other in self.children.values():
                other.close()
            run_child(request, self.own_path, self.own_env)
        request.close_fds()
        try:
            conn.sendall(struct.pack("!i", child))
        except OSError:  # the launcher is gone: so is the child
            with contextlib.suppress(OSError):
                os.kill(child, signal.SIGKILL)
        conn.settimeout(None)
        self.children[child] = conn
        return child


def main(argv: list[str]) -> int:
    """``python -m widehouse.spark.fork_server NAME [--allow PREFIX]... [MODULE ...]``: serve on the
    abstract socket NAME children running modules under :data:`MODULE_PREFIX` (and each PREFIX),
    with :data:`PRELOAD` and each MODULE imported first."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m widehouse.spark.fork_server")
    parser.add_argument("name")
    parser.add_argument("--allow", action="append", default=[], metavar="PREFIX")
    parser.add_argument("--ready-fd", type=int, default=None)
    parser.add_argument("modules", nargs="*")
    args = parser.parse_intermixed_args(argv)
    own_env = dict(os.environ)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind("\0" + args.name)  # first: a launcher that comes early waits in the backlog
    listener.listen(64)
    if args.ready_fd is not None:  # its starter reads to the end of it: bound, requests are served
        os.close(args.ready_fd)
    import importlib

    os.register_at_fork(after_in_child=reseed_after_fork)  # inherited: the children's forks run it too
    with contextlib.suppress(ImportError):  # set up while the process's memory is as it started
        from setproctitle import getproctitle

        getproctitle()
    with frozen_after():  # out of the children's collections
        for module in (*PRELOAD, *args.modules):
            try:
                importlib.import_module(module)
            except Exception as exc:  # a child imports it itself, as a new interpreter would
                print(f"widehouse fork server: {module} not preloaded: {exc}", file=sys.stderr)
    Server(listener, own_env, (MODULE_PREFIX, *args.allow)).serve()
    return 0


# -- the driver's side -------------------------------------------------------------------------------
@dataclass
class ForkServer:
    """A running fork server of this process: its socket's name and the launcher Spark runs."""

    name: str
    launcher: Path
    process: subprocess.Popen[bytes]
    ready_fd: int | None = None

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def wait_ready(self, timeout: float = 10) -> bool:
        """Whether it listens (waiting up to ``timeout`` s the first time): a launcher that came
        before would start Python cold."""
        fd, self.ready_fd = self.ready_fd, None
        if fd is None:
            return self.alive
        try:
            ready, _, _ = select.select([fd], [], [], timeout)
            return bool(ready) and not os.read(fd, 1) and self.alive
        finally:
            os.close(fd)

    def stop(self, timeout: float = 10) -> None:
        """End it as its driver's end would (it waits for its children), killed after ``timeout``."""
        if self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


_RUNNING: dict[str, ForkServer] = {}
_STARTING = threading.Lock()


def launcher_text(python: str) -> str:
    """The launcher's file: :mod:`widehouse.spark.fork_launcher` run by ``python`` without ``site``."""
    source = Path(fork_launcher.__file__).read_text()
    marker = "REAL = sys.executable\n"
    if marker not in source:
        raise RuntimeError(f"{fork_launcher.__file__} has no {marker.strip()!r} line")
    return f"#!{python} -IS\n" + source.replace(marker, f"REAL = {python!r}\n", 1)


def write_launcher(directory: Path, python: str) -> Path:
    """The launcher for ``python`` in ``directory``, written once (atomically) per interpreter and
    launcher text; raises OSError when it cannot be, or when others could change it."""
    text = launcher_text(python)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    path = private_dir(directory) / f"{LAUNCHER_PREFIX}{digest}"
    if not path.exists():
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        partial.write_text(text)
        partial.chmod(0o700)
        os.replace(partial, path)
    reason = others_could_change(path)
    if reason is not None:
        raise PermissionError(f"the fork launcher {path} is not used: {reason}")
    return path


def server_env(environ: Mapping[str, str], zips: Sequence[Path]) -> dict[str, str]:
    """The server's environment: ``environ`` as Spark's Python processes get it (``PYTHONPATH``
    led by Spark's zips, ``PYTHONUNBUFFERED``, pyspark's ``PYTHONHASHSEED``)."""
    env = {**environ, **WORKER_ENV}
    env.setdefault(*HASH_SEED)
    env["PYTHONPATH"] = os.pathsep.join([*map(str, zips), *python_path(environ.get("PYTHONPATH"))])
    env.pop(SERVER, None)
    return env


def start(
    directory: Path, zips: Sequence[Path], preload: Sequence[str] = (), *, allow: Sequence[str] = ()
) -> ForkServer | None:
    """Start a fork server of this interpreter, its launcher in ``directory``; None when the
    launcher cannot be written there or used (logged: Spark starts its Python processes cold)."""
    try:
        launcher = write_launcher(directory, sys.executable)
    except OSError as exc:
        log.warning("Spark's Python processes start cold: %s", exc)
        return None
    name = f"widehouse-spark-fork-{os.getpid()}-{os.urandom(6).hex()}"
    command = [sys.executable, "-m", "widehouse.spark.fork_server"]
    command += [f"--allow={prefix}" for prefix in allow]
    ready_read, ready_write = os.pipe()
    try:
        process = subprocess.Popen(
            [*command, f"--ready-fd={ready_write}", name, *preload],
            stdin=subprocess.PIPE,
            env=server_env(os.environ, zips),
            pass_fds=(ready_write,),
        )
    except BaseException:
        os.close(ready_read)
        raise
    finally:
        os.close(ready_write)
    return ForkServer(name, launcher, process, ready_read)


def running() -> list[ForkServer]:
    """This process's fork servers that run."""
    with _STARTING:
        return [server for server in _RUNNING.values() if server.alive]


def ensure(directory: Path, zips: Sequence[Path], preload: Sequence[str] = ()) -> ForkServer | None:
    """This process's fork server for ``directory`` (started on first use, again if it ended)."""
    key = str(directory)
    with _STARTING:
        running = _RUNNING.get(key)
        if running is None or not running.alive:
            server = start(directory, zips, preload)
            if server is None:
                return None
            _RUNNING[key] = running = server
        return running


@contextlib.contextmanager
def serving(server: ForkServer | None) -> Iterator[None]:
    """Inside it, this process's ``PYSPARK_PYTHON`` is ``server``'s launcher and the server is
    named in its environment, as a driver JVM started inside (and pyspark's context) takes them;
    restored after. Nothing changes with None."""
    if server is None or not server.wait_ready():
        if server is not None:
            log.warning("the fork server %s did not start: Spark's Python processes start cold", server.name)
        yield
        return
    with environ_set({"PYSPARK_PYTHON": str(server.launcher), SERVER: server.name}):
        yield


def is_launcher(path: str | None, python: str | None = None) -> bool:
    """Whether ``path`` is a fork launcher of ``python`` (default: this interpreter)."""
    if not path or not Path(path).name.startswith(LAUNCHER_PREFIX):
        return False
    try:
        with open(path, encoding="utf-8") as file:
            first = file.readline()
    except OSError:
        return False
    return first == f"#!{python or sys.executable} -IS\n"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The interpreter Spark runs for its Python processes when a fork server serves the driver.

This file is not imported by the driver: :mod:`widehouse.spark.fork_server` copies its text into an
executable file (with ``#!<this Python> -I -S`` and :data:`REAL` filled in) that becomes the driver
JVM's ``PYSPARK_PYTHON``. Spark starts it as it would start Python (``<it> -m <module> [args]``);
it asks the fork server named by ``WIDEHOUSE_SPARK_FORK_SERVER`` (an abstract Unix socket) to fork
a child of its own that runs the module with this process's arguments, working dir, environment and
standard streams, then waits for that child: signals sent here go to it, and this process exits as
it did. When there is no server, or the server declines (another command, another interpreter
set-up), it becomes the real interpreter (``exec``), exactly what Spark asked for.

Standard library only, and as little of it as possible: it runs without ``site`` (``-S``) in every
Python process Spark starts.
"""

import marshal
import os
import signal
import socket
import struct
import sys

REAL = sys.executable
"""The real interpreter (the fork server's copy replaces this line with its path)."""
SERVER = "WIDEHOUSE_SPARK_FORK_SERVER"
"""The environment variable naming the fork server's socket (abstract: no file, no leading NUL)."""
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
"""Signals passed on to the child: ``Process.destroy()`` (SIGTERM) among them."""
PROTOCOL = 1


def become_real(argv: list[str]) -> None:
    """Run the real interpreter with ``argv``'s arguments in this process (never returns)."""
    os.execv(REAL, [REAL, *argv[1:]])  # noqa: S606 - the interpreter Spark asked for, its arguments


def request(argv: list[str]) -> bytes:
    """What this process asks the server for: its arguments, working dir and environment."""
    payload = marshal.dumps((PROTOCOL, argv[1:], os.getcwd(), dict(os.environ)))
    return struct.pack("!I", len(payload)) + payload


def receive_int(conn: socket.socket) -> int | None:
    """One 4-byte signed integer from the server, or None when it closed first."""
    data = b""
    while len(data) < 4:
        chunk = conn.recv(4 - len(data))
        if not chunk:
            return None
        data += chunk
    return int(struct.unpack("!i", data)[0])


def exit_as(status: int) -> None:
    """Exit as the child did: its code, or killed by the same signal (never returns)."""
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        if -code not in (signal.SIGKILL, signal.SIGSTOP):  # these two cannot be handled anyway
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        code = 128 - code
    sys.stdout.flush()
    os._exit(code)


def main(argv: list[str]) -> None:
    name = os.environ.get(SERVER)
    if not name or len(argv) < 3 or argv[1] != "-m":
        become_real(argv)
        return
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect("\0" + name)
        message = request(argv)
        conn.sendmsg([message[:4]], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("3i", 0, 1, 2))])
        conn.sendall(message[4:])
        pid = receive_int(conn)
    except OSError:
        pid = None
    if not pid:  # no server, or it declined: the real interpreter, as Spark asked
        conn.close()
        become_real(argv)
        return
    child = pid

    def forward(signum: int, _frame: object) -> None:
        try:  # noqa: SIM105 - no contextlib: this runs in every Python process Spark starts
            os.kill(child, signum)
        except OSError:  # it has ended: its status is on its way
            pass

    for number in FORWARDED:
        signal.signal(number, forward)
    status = receive_int(conn)
    # the server closed without a status only when it was killed: the child's fate is unknown
    exit_as(status if status is not None else 1 << 8)


if __name__ == "__main__":
    main(sys.argv)

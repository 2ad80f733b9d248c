"""Test helpers: the ClickHouse service (``python -m widehouse.clickhouse.server``) as a subprocess."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

USER = "wh_test"
PASSWORD = "s3cret-pw"
_READY = re.compile(r"^ready: .* on http://([^ ]+):(\d+) ")


class ServerProcess:
    """One service process on a data directory, started on a free loopback port."""

    def __init__(
        self,
        data_dir: Path,
        handles: int = 4,
        max_body_bytes: int | None = None,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        self.data_dir = data_dir
        self.handles = handles
        self.max_body_bytes = max_body_bytes
        self.extra_args = extra_args
        self.proc: subprocess.Popen[str] | None = None
        self.port = 0
        self.lines: queue.Queue[str] = queue.Queue()
        self.log_file = data_dir.parent / f"{data_dir.name}-server.log"

    def start(self, timeout: float = 60.0) -> ServerProcess:
        argv = [
            sys.executable, "-m", "widehouse.clickhouse.server", "--data-dir", str(self.data_dir),
            "--port", "0", "--user", USER, "--handles", str(self.handles), "--log-file", str(self.log_file),
        ]  # fmt: skip
        if self.max_body_bytes is not None:
            argv += ["--max-body-bytes", str(self.max_body_bytes)]
        argv += self.extra_args
        env = {**os.environ, "WIDEHOUSE_CLICKHOUSE_PASSWORD": PASSWORD}
        self.proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
        )
        threading.Thread(target=self._pump, args=(self.proc,), daemon=True).start()
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                self.kill()
                raise RuntimeError(f"the ClickHouse service did not start in {timeout} s") from None
            match = _READY.match(line)
            if match:
                self.port = int(match.group(2))
                return self
            if line == "":  # the process ended
                raise RuntimeError(
                    f"the ClickHouse service exited with {self.proc.wait()}: see {self.log_file}"
                )

    def _pump(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put("")

    def client(self, **kwargs: Any) -> Any:
        import clickhouse_connect

        return clickhouse_connect.get_client(
            host="127.0.0.1", port=self.port, username=USER, password=PASSWORD, **kwargs
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM and wait: the exit code of a clean stop."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        """SIGKILL: no chance to flush or close anything."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)

    def reset_peak_rss(self) -> None:
        """Start :meth:`peak_rss` again from the current resident memory (Linux ``clear_refs``)."""
        assert self.proc is not None
        Path(f"/proc/{self.proc.pid}/clear_refs").write_text("5")

    def peak_rss(self) -> int:
        """The process's peak resident memory since start or :meth:`reset_peak_rss`, in bytes (``VmHWM``)."""
        assert self.proc is not None
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError("no VmHWM in /proc status")

    def output(self) -> list[str]:
        """Lines printed on stdout/stderr so far (after the ready line)."""
        out = []
        while not self.lines.empty():
            out.append(self.lines.get_nowait())
        return out

"""`widehouse services up` on a fresh state dir: the ClickHouse service runs with the password it
generated, printed once, and refuses the old public constant. Runs its own ClickHouse service (own
state dir, own free port) and stops it; the session's services are not touched."""

from __future__ import annotations

import socket
import stat
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.support import without_settings

pytestmark = [pytest.mark.integration]

OLD_CONSTANT = "widehouse-local"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def select_one(port: int, user: str, password: str) -> str:
    """``SELECT 1`` over HTTP with these credentials: the body, or ``HTTP <code>`` when refused."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/?query=SELECT%201",
        headers={"X-ClickHouse-User": user, "X-ClickHouse-Key": password},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return str(reply.read().decode().strip())
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code}"


def services(env: dict[str, str], action: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "widehouse", "services", action, "clickhouse"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


def test_services_up_generates_the_password_the_server_requires(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o755)
    state.chmod(0o755)  # an existing, open state dir: `up` tightens it
    port = free_port()
    env = without_settings()
    env.update({"WIDEHOUSE_STATE_DIR": str(state), "WIDEHOUSE_CLICKHOUSE_PORT": str(port)})
    try:
        up = services(env, "up")
        assert up.returncode == 0, up.stdout + up.stderr
        path = state / "secrets" / "clickhouse-password"
        generated = path.read_text().strip()
        assert f"generated the local ClickHouse password: {generated}" in up.stdout
        assert str(path) in up.stdout and "widehouse config --show-secrets" in up.stdout
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        for directory in (state, state / "services", state / "services" / "clickhouse"):
            assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory

        assert select_one(port, "widehouse", generated) == "1"
        assert select_one(port, "widehouse", OLD_CONSTANT).startswith("HTTP 4")
        assert select_one(port, "default", "").startswith("HTTP 4")

        again = services(env, "up")
        assert again.returncode == 0, again.stdout + again.stderr
        assert "already running" in again.stdout
        assert "generated" not in again.stdout  # printed once, when it was made
        assert path.read_text().strip() == generated
    finally:
        down = services(env, "down")
    assert down.returncode == 0, down.stdout + down.stderr
